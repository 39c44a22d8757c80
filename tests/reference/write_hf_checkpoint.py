#!/usr/bin/python3
"""Writes small random-weight Hugging Face checkpoints (config.json, tokenizer, safetensors) for
the converter tests, with numpy only.

    write_hf_checkpoint.py --arch llama|gemma4 --variant NAME [--dtype bf16|f16|f32]
                           [--shards N] [--seed S] [--shared DIR] -o DIR

Variants: llama "tiny" (GQA, untied, Llama 2 SentencePiece tokenizer from --shared) and
"tiny-llama3" (Llama 3 rope scaling, tied embeddings); gemma4 "tiny-e" (spec §7.1: PLE, KV
sharing with leftover K/V tensors on shared layers, double-wide MLP, multimodal wrapper with
vision tensors to skip) and "tiny-moe" (§7.2: MoE, k_eq_v, per-type KV heads; text-only).
Tensor names, shapes and config fields are the Hugging Face ones (spec §3.3 lists the Gemma 4
names); the weights are what the checkpoint's own reference (hf_reference.py) runs on.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import write_checkpoint  # noqa: E402


def normal(rng, shape, std):
    return rng.normal(0.0, std, size=shape).astype(np.float32)


def norm_weight(rng, n, scale=1.0):
    return ((1.0 + 0.1 * rng.normal(size=n)) * scale).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# llama

def llama_config(variant):
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
         "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
         "max_position_embeddings": 256, "vocab_size": 32000, "tie_word_embeddings": False,
         "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}
    if variant == "tiny-llama3":
        c["rope_theta"] = 500000.0
        c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
        c["tie_word_embeddings"] = True
    return c


def llama_tensors(c, rng):
    H, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    t = {"model.embed_tokens.weight": normal(rng, (V, H), 0.5),
         "model.norm.weight": norm_weight(rng, H)}
    if not c["tie_word_embeddings"]:
        t["lm_head.weight"] = normal(rng, (V, H), 0.1)
    for il in range(c["num_hidden_layers"]):
        p = f"model.layers.{il}."
        t[p + "input_layernorm.weight"] = norm_weight(rng, H)
        t[p + "self_attn.q_proj.weight"] = normal(rng, (q, H), 0.2)
        t[p + "self_attn.k_proj.weight"] = normal(rng, (kv, H), 0.2)
        t[p + "self_attn.v_proj.weight"] = normal(rng, (kv, H), 0.2)
        t[p + "self_attn.o_proj.weight"] = normal(rng, (H, q), 0.2)
        t[p + "post_attention_layernorm.weight"] = norm_weight(rng, H)
        t[p + "mlp.gate_proj.weight"] = normal(rng, (F, H), 0.2)
        t[p + "mlp.up_proj.weight"] = normal(rng, (F, H), 0.2)
        t[p + "mlp.down_proj.weight"] = normal(rng, (H, F), 0.2)
    return t


def llama_tokenizer(directory, shared):
    shutil.copy(os.path.join(shared, "models", "llama2c", "tokenizer.model"),
                os.path.join(directory, "tokenizer.model"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
                   "eos_token": "</s>", "unk_token": "<unk>",
                   "tokenizer_class": "LlamaTokenizer"}, f, indent=1)


# ----------------------------------------------------------------------------------------------
# Gemma 4 (spec §7)

def gemma4_config(variant):
    rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                               "rope_theta": 1000000.0}}
    if variant == "tiny-e":
        text = {"hidden_size": 128, "num_hidden_layers": 8,
                "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                                "sliding_attention", "full_attention", "sliding_attention",
                                "sliding_attention", "full_attention"],
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                "global_head_dim": 64, "intermediate_size": 256, "use_double_wide_mlp": True,
                "num_kv_shared_layers": 3, "hidden_size_per_layer_input": 16,
                "vocab_size_per_layer_input": 512, "attention_k_eq_v": False,
                "enable_moe_block": False}
    else:
        text = {"hidden_size": 128, "num_hidden_layers": 6,
                "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                                "sliding_attention", "sliding_attention", "full_attention"],
                "num_attention_heads": 4, "num_key_value_heads": 2,
                "num_global_key_value_heads": 1, "head_dim": 32, "global_head_dim": 64,
                "intermediate_size": 96, "num_kv_shared_layers": 0,
                "hidden_size_per_layer_input": 0, "attention_k_eq_v": True,
                "enable_moe_block": True, "num_experts": 8, "top_k_experts": 2,
                "moe_intermediate_size": 32}
    text.update({"model_type": "gemma4_text", "vocab_size": 512, "sliding_window": 8,
                 "rope_parameters": rope, "rms_norm_eps": 1e-6, "final_logit_softcapping": 30.0,
                 "max_position_embeddings": 256, "tie_word_embeddings": True,
                 "hidden_activation": "gelu_pytorch_tanh", "pad_token_id": 0, "bos_token_id": 2,
                 "eos_token_id": 1})
    if variant == "tiny-e":
        return {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
                "text_config": text, "vision_config": {"hidden_size": 32}}
    return dict(text, architectures=["Gemma4ForCausalLM"])


def gemma4_tensors(config, rng):
    c = config.get("text_config", config)
    prefix = "model.language_model." if "text_config" in config else "model."
    H, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    nh, P = c["num_attention_heads"], c["hidden_size_per_layer_input"]
    first_shared = L - c["num_kv_shared_layers"]
    t = {prefix + "embed_tokens.weight": normal(rng, (V, H), 0.05),
         # x16: random-weight logits stay large enough that a missing softcap shows (spec §9).
         prefix + "norm.weight": norm_weight(rng, H, 16.0)}
    if P:
        t[prefix + "embed_tokens_per_layer.weight"] = normal(rng, (V, L * P), 0.05)
        t[prefix + "per_layer_model_projection.weight"] = normal(rng, (L * P, H), 0.05)
        t[prefix + "per_layer_projection_norm.weight"] = norm_weight(rng, P)
    for il in range(L):
        swa = c["layer_types"][il] == "sliding_attention"
        hd = c["head_dim"] if swa else c["global_head_dim"]
        nkv = c["num_key_value_heads"] if swa else c.get("num_global_key_value_heads", c["num_key_value_heads"])
        ff = c["intermediate_size"] * (2 if c.get("use_double_wide_mlp") and il >= first_shared else 1)
        p = f"{prefix}layers.{il}."
        t[p + "input_layernorm.weight"] = norm_weight(rng, H)
        t[p + "self_attn.q_proj.weight"] = normal(rng, (nh * hd, H), 0.05)
        t[p + "self_attn.q_norm.weight"] = norm_weight(rng, hd)
        # Shared layers keep (unused) K/V tensors, as some releases do (spec §3.3 note a).
        t[p + "self_attn.k_proj.weight"] = normal(rng, (nkv * hd, H), 0.05)
        if swa or not c["attention_k_eq_v"]:
            t[p + "self_attn.v_proj.weight"] = normal(rng, (nkv * hd, H), 0.05)
        # x0.25: with attention scale 1.0, big k-norms amplify rounding noise (spec §9).
        t[p + "self_attn.k_norm.weight"] = norm_weight(rng, hd, 0.25)
        t[p + "self_attn.o_proj.weight"] = normal(rng, (H, nh * hd), 0.05)
        t[p + "post_attention_layernorm.weight"] = norm_weight(rng, H)
        t[p + "pre_feedforward_layernorm.weight"] = norm_weight(rng, H)
        t[p + "mlp.gate_proj.weight"] = normal(rng, (ff, H), 0.05)
        t[p + "mlp.up_proj.weight"] = normal(rng, (ff, H), 0.05)
        t[p + "mlp.down_proj.weight"] = normal(rng, (H, ff), 0.05)
        t[p + "post_feedforward_layernorm.weight"] = norm_weight(rng, H)
        t[p + "layer_scalar"] = rng.uniform(0.5, 1.0, size=(1,)).astype(np.float32)
        if c["enable_moe_block"]:
            E, F = c["num_experts"], c["moe_intermediate_size"]
            t[p + "router.proj.weight"] = normal(rng, (E, H), 1.0)   # N(0,1): no near-ties (§9)
            t[p + "router.scale"] = rng.uniform(0.9, 1.1, size=H).astype(np.float32)
            t[p + "router.per_expert_scale"] = rng.uniform(0.5, 1.5, size=E).astype(np.float32)
            t[p + "pre_feedforward_layernorm_2.weight"] = norm_weight(rng, H)
            t[p + "post_feedforward_layernorm_1.weight"] = norm_weight(rng, H)
            t[p + "post_feedforward_layernorm_2.weight"] = norm_weight(rng, H)
            t[p + "experts.gate_up_proj"] = normal(rng, (E, 2 * F, H), 0.05)
            t[p + "experts.down_proj"] = normal(rng, (E, H, F), 0.05)
        if P:
            t[p + "per_layer_input_gate.weight"] = normal(rng, (P, H), 0.05)
            t[p + "per_layer_projection.weight"] = normal(rng, (H, P), 0.05)
            t[p + "post_per_layer_input_norm.weight"] = norm_weight(rng, H)
    if "text_config" in config:  # a vision tower the text conversion leaves out
        t["model.vision_tower.encoder.layers.0.mlp.fc1.weight"] = normal(rng, (32, 32), 0.05)
        t["model.embed_vision.embedding_projection.weight"] = normal(rng, (H, 32), 0.05)
    return t


def gemma4_tokenizer(directory):
    """A 512-token Gemma-style vocabulary: specials, the 256 byte tokens, letters with ▁ and a
    few merges (byte fallback, no dummy prefix)."""
    specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    tokens = specials + [f"<0x{b:02X}>" for b in range(256)]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens += ["\u2581"] + letters + ["\u2581" + l for l in letters]
    merges = [["\u2581", l] for l in letters]
    for a in letters:
        for b in letters:
            if len(tokens) >= 510:
                break
            tokens.append(a + b)
            merges.append([a, b])
    tokens += ["<|turn>", "<turn|>"]
    vocab = {t: i for i, t in enumerate(tokens)}
    added = [{"id": i, "content": t, "special": True, "normalized": False, "lstrip": False,
              "rstrip": False, "single_word": False}
             for i, t in enumerate(tokens) if i < 4 or i >= 510]
    tokenizer = {"version": "1.0", "added_tokens": added,
                 "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
                 "pre_tokenizer": {"type": "Split", "pattern": {"String": " "},
                                   "behavior": "MergedWithPrevious", "invert": False},
                 "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}]},
                 "model": {"type": "BPE", "byte_fallback": True, "ignore_merges": False,
                           "vocab": vocab, "merges": merges}}
    with open(os.path.join(directory, "tokenizer.json"), "w") as f:
        json.dump(tokenizer, f)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<bos>", "eos_token": "<turn|>", "pad_token": "<pad>",
                   "unk_token": "<unk>", "chat_template": "{{ bos_token }}{{ messages[0]['content'] }}"},
                  f, indent=1)


# ----------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", required=True, choices=["llama", "gemma4"])
    ap.add_argument("--variant", required=True)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    os.makedirs(args.output, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    if args.arch == "llama":
        config = llama_config(args.variant)
        tensors = llama_tensors(config, rng)
        llama_tokenizer(args.output, args.shared)
    else:
        config = gemma4_config(args.variant)
        tensors = gemma4_tensors(config, rng)
        gemma4_tokenizer(args.output)
    with open(os.path.join(args.output, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    dtype = {"bf16": "BF16", "f16": "F16", "f32": "F32"}[args.dtype]
    # Norms and scalars are stored as the checkpoint dtype too (HF checkpoints are uniform).
    write_checkpoint(args.output, tensors, lambda name: dtype, args.shards)


if __name__ == "__main__":
    main()
