#!/usr/bin/python3
"""Float64 forward passes over Hugging Face checkpoints (safetensors + config.json), in the
checkpoint's own layout and names: the truth a converted GGUF is checked against.

    hf_reference.py CHECKPOINT_DIR --ids 1,2,3 -o out.f32 [--lora PEFT_DIR --lora-scale S]

Written from the published architectures (Hugging Face's LlamaForCausalLM: rotate-half RoPE on
un-permuted Q/K, Llama 3 frequency scaling; Gemma 4 per ../shared/specs/gemma4.md §1–§2, in HF
tensor names), independent of headroom's converter and of reference_model.py's GGUF reading; it
shares only the small math blocks (RMSNorm, GELU, attention, masks) with reference_model.py.
With --lora, every targeted weight is replaced by the merged W + scale·B·A (PEFT semantics,
scale = lora_alpha / r times --lora-scale) before the forward pass.
Writes the logits of every position as little-endian float32 [n_tokens x vocab_size].
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_model import (attention, causal_mask, gelu_tanh, linear, moe_route,  # noqa: E402
                             rmsnorm, rope_rotate_half, silu)
from safetensors_io import read_checkpoint, read_file  # noqa: E402


def load_config(directory):
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    text = dict(config, **config.get("text_config", {}))
    return config, text


# ----------------------------------------------------------------------------------------------
# LlamaForCausalLM

def llama_inv_freq(c, head_dim):
    """HF's rotary frequencies, with rope_type llama3's wavelength-dependent slow-down."""
    theta = c.get("rope_theta", 10000.0)
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    rope = c.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type")) == "llama3":
        factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
        old = rope["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        scaled = np.where(wavelen > old / low, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        inv_freq = np.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
    return inv_freq


def rope_with_inv_freq(x, positions, inv_freq):
    """Rotate-half RoPE over the whole head with explicit frequencies; x [T, heads, d]."""
    half = x.shape[-1] // 2
    angle = positions[:, None] * inv_freq                       # [T, half]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    a, b = x[:, :, :half], x[:, :, half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def forward_llama(c, w, ids):
    H, nh = c["hidden_size"], c["num_attention_heads"]
    nkv = c.get("num_key_value_heads", nh)
    hd = c.get("head_dim", H // nh)
    eps = c.get("rms_norm_eps", 1e-5)
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    inv_freq = llama_inv_freq(c, hd)
    mask = causal_mask(T)
    x = w["model.embed_tokens.weight"][ids]
    for il in range(c["num_hidden_layers"]):
        p = f"model.layers.{il}."
        h = rmsnorm(x, w[p + "input_layernorm.weight"], eps)
        q = rope_with_inv_freq(linear(w[p + "self_attn.q_proj.weight"], h).reshape(T, nh, hd), pos, inv_freq)
        k = rope_with_inv_freq(linear(w[p + "self_attn.k_proj.weight"], h).reshape(T, nkv, hd), pos, inv_freq)
        v = linear(w[p + "self_attn.v_proj.weight"], h).reshape(T, nkv, hd)
        x = x + linear(w[p + "self_attn.o_proj.weight"], attention(q, k, v, mask, 1.0 / math.sqrt(hd)))
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + linear(w[p + "mlp.down_proj.weight"],
                       silu(linear(w[p + "mlp.gate_proj.weight"], h)) * linear(w[p + "mlp.up_proj.weight"], h))
    y = rmsnorm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return linear(head, y)


# ----------------------------------------------------------------------------------------------
# Gemma 4 text model (spec §2), HF names

def forward_gemma4(c, w, ids):
    p0 = "model.language_model." if "model.language_model.embed_tokens.weight" in w else "model."
    H, L, nh = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    P = c.get("hidden_size_per_layer_input") or 0
    eps = c.get("rms_norm_eps", 1e-6)
    window = c["sliding_window"]
    rope = c["rope_parameters"]
    theta_swa = rope["sliding_attention"]["rope_theta"]
    full = rope["full_attention"]
    theta_full, partial = full["rope_theta"], full["partial_rotary_factor"]
    hd_swa, hd_full = c["head_dim"], c.get("global_head_dim", c["head_dim"])
    first_shared = L - (c.get("num_kv_shared_layers") or 0)
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    # Proportional RoPE (§2.5): over the full head, only the first partial*hd/2 pairs turn.
    factors = np.full(hd_full // 2, np.inf)
    factors[:int(partial * hd_full) // 2] = 1.0

    def full_rope(x):
        return rope_rotate_half(x, pos, hd_full, theta_full, factors)

    def swa_rope(x):
        return rope_rotate_half(x, pos, hd_swa, theta_swa)

    embd = w[p0 + "embed_tokens.weight"]
    x0 = embd[ids] * math.sqrt(H)
    ple = None
    if P:
        z = w[p0 + "embed_tokens_per_layer.weight"][ids].reshape(T, L, P) * math.sqrt(P)
        proj = linear(w[p0 + "per_layer_model_projection.weight"], x0) * H ** -0.5
        proj = rmsnorm(proj.reshape(T, L, P), w[p0 + "per_layer_projection_norm.weight"], eps)
        ple = (proj + z) * 2 ** -0.5
    h = x0
    cache = {}  # layer type -> (k, v) of the last KV-owning layer of that type
    for il in range(L):
        p = f"{p0}layers.{il}."
        swa = c["layer_types"][il] == "sliding_attention"
        hd = hd_swa if swa else hd_full
        nkv = c["num_key_value_heads"] if swa else c.get("num_global_key_value_heads") or c["num_key_value_heads"]
        rope_fn = swa_rope if swa else full_rope
        a = rmsnorm(h, w[p + "input_layernorm.weight"], eps)
        q = rope_fn(rmsnorm(linear(w[p + "self_attn.q_proj.weight"], a).reshape(T, nh, hd),
                            w[p + "self_attn.q_norm.weight"], eps))
        if il < first_shared:  # HF: shared layers reuse the last earlier layer of their type
            k_raw = linear(w[p + "self_attn.k_proj.weight"], a).reshape(T, nkv, hd)
            v_name = p + "self_attn.v_proj.weight"
            v_raw = linear(w[v_name], a).reshape(T, nkv, hd) if v_name in w else k_raw
            k = rope_fn(rmsnorm(k_raw, w[p + "self_attn.k_norm.weight"], eps))
            v = rmsnorm(v_raw, None, eps)
            cache[swa] = (k, v)
        k, v = cache[swa]
        o = attention(q, k, v, causal_mask(T, window if swa else None), 1.0)
        h_mid = h + rmsnorm(linear(w[p + "self_attn.o_proj.weight"], o), w[p + "post_attention_layernorm.weight"], eps)
        f = rmsnorm(h_mid, w[p + "pre_feedforward_layernorm.weight"], eps)
        d = linear(w[p + "mlp.down_proj.weight"],
                   gelu_tanh(linear(w[p + "mlp.gate_proj.weight"], f)) * linear(w[p + "mlp.up_proj.weight"], f))
        if c.get("enable_moe_block"):
            d1 = rmsnorm(d, w[p + "post_feedforward_layernorm_1.weight"], eps)
            r = rmsnorm(h_mid, None, eps) * H ** -0.5 * w[p + "router.scale"]
            logits = linear(w[p + "router.proj.weight"], r)
            e_in = rmsnorm(h_mid, w[p + "pre_feedforward_layernorm_2.weight"], eps)
            gate_up, down = w[p + "experts.gate_up_proj"], w[p + "experts.down_proj"]
            F = gate_up.shape[1] // 2
            m = np.zeros_like(h_mid)
            for ti in range(T):
                chosen, weights = moe_route(logits[ti], c["top_k_experts"], w.get(p + "router.per_expert_scale"))
                for e, we in zip(chosen, weights):
                    gu = gate_up[e] @ e_in[ti]
                    m[ti] += we * (down[e] @ (gelu_tanh(gu[:F]) * gu[F:]))
            d = d1 + rmsnorm(m, w[p + "post_feedforward_layernorm_2.weight"], eps)
        h = h_mid + rmsnorm(d, w[p + "post_feedforward_layernorm.weight"], eps)
        if ple is not None:
            g = gelu_tanh(linear(w[p + "per_layer_input_gate.weight"], h)) * ple[:, il, :]
            h = h + rmsnorm(linear(w[p + "per_layer_projection.weight"], g), w[p + "post_per_layer_input_norm.weight"], eps)
        if p + "layer_scalar" in w:
            h = h * w[p + "layer_scalar"].reshape(())
    y = rmsnorm(h, w[p0 + "norm.weight"], eps)
    logits = linear(w.get("lm_head.weight", embd), y)
    cap = c.get("final_logit_softcapping")
    return cap * np.tanh(logits / cap) if cap else logits


# ----------------------------------------------------------------------------------------------
# LoRA (PEFT): merged weights

def merge_lora(weights, lora_dir, scale):
    """W' = W + (lora_alpha / r) · scale · B @ A for every module the adapter targets."""
    with open(os.path.join(lora_dir, "adapter_config.json")) as f:
        cfg = json.load(f)
    alpha_over_r = cfg["lora_alpha"] / cfg["r"]
    lora = read_file(os.path.join(lora_dir, "adapter_model.safetensors"))
    merged = dict(weights)
    for name, a in lora.items():
        if ".lora_A." not in name:
            continue
        b = lora[name.replace(".lora_A.", ".lora_B.")]
        base = name.replace("base_model.model.", "", 1).replace(".lora_A.weight", ".weight")
        merged[base] = weights[base] + alpha_over_r * scale * (b @ a)
    return merged


def forward(directory, ids, lora=None, lora_scale=1.0):
    config, text = load_config(directory)
    weights = read_checkpoint(directory)
    if lora:
        weights = merge_lora(weights, lora, lora_scale)
    arch = config["architectures"][0]
    ids = np.asarray(ids, dtype=np.int64)
    if arch in ("LlamaForCausalLM", "MistralForCausalLM"):
        return forward_llama(text, weights, ids)
    if arch in ("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"):
        return forward_gemma4(text, weights, ids)
    raise ValueError(f"no reference for {arch}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--ids", required=True)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--lora", help="PEFT adapter directory to merge")
    ap.add_argument("--lora-scale", type=float, default=1.0)
    args = ap.parse_args()
    ids = [int(s) for s in args.ids.split(",") if s.strip()]
    forward(args.checkpoint, ids, args.lora, args.lora_scale).astype("<f4").tofile(args.output)


if __name__ == "__main__":
    main()
