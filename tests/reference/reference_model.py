#!/usr/bin/python3
"""Reference forward passes (float64 numpy) for llama and Gemma 4 GGUF models: a test oracle.

Written from ../shared/specs/gemma4.md (§2) and ../shared/models/README.md alone, without
looking at headroom's C++ model code, so that a disagreement points at a misreading on one
side. It favours plainness over speed: the whole sequence is evaluated at once with explicit
masks (no KV cache, no ring buffers, no micro-batches), everything in float64.

    reference_model.py MODEL.gguf --ids 1,2,3 -o out.f32 [--dump-experts] [--lora ADAPTER.gguf[:SCALE]]
        [--media DUMP.gguf:FIRST:image|audio ...] [--bidirectional-vision]

writes the logits of every position as little-endian float32 [n_tokens x n_vocab], the same
layout as `headroom logits`.

--media puts an image's or clip's embeddings (the "projected" array of a reference_mm.py dump,
[n, H]) at positions FIRST..FIRST+n-1 in place of those tokens' embeddings, as Hugging Face's
Gemma4Model merges soft tokens (modeling_gemma4.py, Gemma4Model.forward): the embeddings go in
as they are, not scaled by sqrt(H) (spec §2.1); the per-layer inputs' token part reads the pad
token's row there (input ids replaced by pad_token_id), their projection part projects the
merged embeddings. --bidirectional-vision is the text config's use_bidirectional_attention
"vision" (Gemma 4 31B and 26B-A4B): on sliding layers an image's tokens also see each other
ahead (create_causal_mask_mapping: the image group's mask OR'ed with the sliding causal mask);
full layers and audio stay causal.

Shapes: T tokens, H hidden, V vocab; weights are numpy [out, in] (ggml {in, out}), so y = W @ x.
"""

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_reader import GgufFile  # noqa: E402


# ----------------------------------------------------------------------------------------------
# Building blocks (spec §0.1)

def rmsnorm(x, weight, eps):
    """x [..., n] * (mean(x^2) + eps)^(-1/2) * weight; weight None = RMSNorm0 (no weight)."""
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if weight is None else y * weight


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def linear(w, x):
    """x [T, in] → [T, out] with w [out, in]."""
    return x @ w.T


def attention(q, k, v, mask, scale):
    """q [T, nh, d], k/v [T, nkv, d], mask [T, T] bool (True = visible) → [T, nh*d].

    Query head i reads kv head i // (nh / nkv) (grouped-query attention)."""
    n_tokens, nh, d = q.shape
    nkv = k.shape[1]
    group = nh // nkv
    out = np.zeros((n_tokens, nh, d))
    for i in range(nh):
        kv = i // group
        scores = (q[:, i, :] @ k[:, kv, :].T) * scale           # [Tq, Tk]
        scores = np.where(mask, scores, -np.inf)
        out[:, i, :] = softmax(scores, axis=-1) @ v[:, kv, :]
    return out.reshape(n_tokens, nh * d)


def rope_adjacent(x, positions, n_rot, theta):
    """llama 'NORM' RoPE: pairs (2i, 2i+1) of each head, angle pos * theta^(-2i/n_rot).

    x [T, heads, d]; dims >= n_rot pass through."""
    out = x.copy()
    i = np.arange(n_rot // 2)
    angle = positions[:, None] * theta ** (-2.0 * i / n_rot)     # [T, n_rot/2]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    a, b = x[:, :, 0:n_rot:2], x[:, :, 1:n_rot:2]
    out[:, :, 0:n_rot:2] = a * cos - b * sin
    out[:, :, 1:n_rot:2] = b * cos + a * sin
    return out


def rope_rotate_half(x, positions, n_rot, theta, freq_factors=None):
    """NeoX / rotate-half RoPE (spec §2.5): element i pairs with i + n_rot/2, i < n_rot/2, angle
    pos * theta^(-2i/n_rot) / factor_i. x [T, heads, d]; dims >= n_rot pass through."""
    out = x.copy()
    half = n_rot // 2
    i = np.arange(half)
    omega = theta ** (-2.0 * i / n_rot)
    if freq_factors is not None:
        omega = omega / freq_factors[:half]
    angle = positions[:, None] * omega                           # [T, half]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    a, b = x[:, :, 0:half], x[:, :, half:n_rot]
    out[:, :, 0:half] = a * cos - b * sin
    out[:, :, half:n_rot] = b * cos + a * sin
    return out


def causal_mask(n_tokens, window=None):
    """[Tq, Tk] bool: key k visible to query q iff k <= q (and k > q - window when sliding)."""
    q = np.arange(n_tokens)[:, None]
    k = np.arange(n_tokens)[None, :]
    visible = k <= q
    if window is not None:
        visible &= k > q - window
    return visible


def kv_round(x, kv_type):
    """What a KV cache of `kv_type` gives back for x [T, heads, d]: the reference itself keeps
    float64, this only emulates the storage rounding so that a quantized cache can be checked
    tightly. Q8_0 blocks run along each token's row of heads*d values (32 per block): d =
    max|x|/127, q = round-half-away(x/d), and the scale is kept as f16."""
    if kv_type == "f32":
        return x.astype(np.float32).astype(np.float64)
    if kv_type == "f16":
        return x.astype(np.float16).astype(np.float64)
    if kv_type == "q8_0":
        rows = x.reshape(x.shape[0], -1)
        if rows.shape[1] % 32:
            raise ValueError(f"q8_0 KV needs rows of whole 32-blocks, not {rows.shape[1]}")
        blocks = rows.reshape(rows.shape[0], -1, 32)
        d = np.max(np.abs(blocks), axis=-1, keepdims=True) / 127.0
        scaled = np.divide(blocks, d, out=np.zeros_like(blocks), where=d > 0)
        q = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
        return (q * d.astype(np.float16).astype(np.float64)).reshape(x.shape)
    if kv_type == "none":
        return x
    raise ValueError(f"unknown KV type {kv_type!r}")


def per_layer(value, n_layer, name):
    """A per-layer key may be a scalar (broadcast) or an array of length L (spec §3.2)."""
    if isinstance(value, list):
        if len(value) != n_layer:
            raise ValueError(f"{name}: array of {len(value)} for {n_layer} layers")
        return [int(v) if not isinstance(v, bool) else v for v in value]
    return [value] * n_layer


# ----------------------------------------------------------------------------------------------
# llama (stories260K; ../shared/models/README.md)

def forward_llama(f, ids, kv_type="none"):
    a = "llama"
    n_layer = int(f.get(f"{a}.block_count"))
    n_embd = int(f.get(f"{a}.embedding_length"))
    nh = int(f.get(f"{a}.attention.head_count"))
    nkv = int(f.get(f"{a}.attention.head_count_kv", nh))
    eps = float(f.get(f"{a}.attention.layer_norm_rms_epsilon", 1e-5))
    theta = float(f.get(f"{a}.rope.freq_base", 10000.0))
    hd = n_embd // nh
    n_rot = int(f.get(f"{a}.rope.dimension_count", hd))
    n_tokens = len(ids)
    pos = np.arange(n_tokens, dtype=np.float64)
    mask = causal_mask(n_tokens)

    x = f.tensor("token_embd.weight")[ids]                       # [T, H]
    for il in range(n_layer):
        t = lambda n: f.tensor(f"blk.{il}.{n}.weight")           # noqa: E731
        h = rmsnorm(x, t("attn_norm"), eps)
        q = linear(t("attn_q"), h).reshape(n_tokens, nh, hd)
        k = linear(t("attn_k"), h).reshape(n_tokens, nkv, hd)
        v = linear(t("attn_v"), h).reshape(n_tokens, nkv, hd)
        q = rope_adjacent(q, pos, n_rot, theta)
        k = kv_round(rope_adjacent(k, pos, n_rot, theta), kv_type)
        v = kv_round(v, kv_type)
        x = x + linear(t("attn_output"), attention(q, k, v, mask, 1.0 / math.sqrt(hd)))
        h = rmsnorm(x, t("ffn_norm"), eps)
        x = x + linear(t("ffn_down"), silu(linear(t("ffn_gate"), h)) * linear(t("ffn_up"), h))
    y = rmsnorm(x, f.tensor("output_norm.weight"), eps)
    out_w = f.tensor("output.weight") if f.has("output.weight") else f.tensor("token_embd.weight")
    return linear(out_w, y)


# ----------------------------------------------------------------------------------------------
# Gemma 4 (spec §1–§3)

class Gemma4Config:
    """Per-layer hyperparameters read from the GGUF keys of spec §3.2, with the §1.3 KV rule."""

    def __init__(self, f):
        a = "gemma4"
        g = lambda k, d=None: f.get(f"{a}.{k}", d)                # noqa: E731
        self.n_layer = L = int(g("block_count"))
        self.n_embd = int(g("embedding_length"))
        self.n_head = int(g("attention.head_count"))
        self.n_head_kv = per_layer(g("attention.head_count_kv", self.n_head), L, "head_count_kv")
        self.n_ff = per_layer(g("feed_forward_length"), L, "feed_forward_length")
        self.is_swa = [bool(b) for b in g("attention.sliding_window_pattern")]
        if len(self.is_swa) != L:
            raise ValueError("sliding_window_pattern length != block_count")
        self.hd_full = int(g("attention.key_length"))
        self.hd_swa = int(g("attention.key_length_swa"))
        if int(g("attention.value_length", self.hd_full)) != self.hd_full or \
                int(g("attention.value_length_swa", self.hd_swa)) != self.hd_swa:
            raise ValueError("value_length must equal key_length (spec §3.3)")
        self.eps = float(g("attention.layer_norm_rms_epsilon", 1e-6))
        self.window = int(g("attention.sliding_window"))
        self.n_shared = int(g("attention.shared_kv_layers", 0))
        self.n_ple = int(g("embedding_length_per_layer_input", 0))
        self.theta_full = float(g("rope.freq_base", 1e6))
        self.theta_swa = float(g("rope.freq_base_swa", 1e4))
        self.n_rot_full = int(g("rope.dimension_count", self.hd_full))
        self.n_rot_swa = int(g("rope.dimension_count_swa", self.hd_swa))
        # Optional key; absent means no softcap.
        self.softcap = g("final_logit_softcapping")
        self.n_expert = int(g("expert_count", 0))
        self.n_expert_used = int(g("expert_used_count", 0))

        # KV sharing, HF rule (spec §1.3): a layer at or past first_shared reuses the last
        # non-shared layer of the same type.
        first_shared = L - self.n_shared
        self.kv_src = []
        for il in range(L):
            if il < first_shared:
                self.kv_src.append(il)
                continue
            src = [j for j in range(first_shared) if self.is_swa[j] == self.is_swa[il]]
            if not src:
                raise ValueError(f"layer {il}: no non-shared layer of its type to share KV with")
            self.kv_src.append(src[-1])
            # llama.cpp's fixed formula; the two agree on every released variant (spec §1.3).
            llama_cpp_src = first_shared - 2 if self.is_swa[il] else first_shared - 1
            if llama_cpp_src != src[-1]:
                print(f"warning: layer {il}: KV source {src[-1]} (HF rule) != {llama_cpp_src} (llama.cpp rule)",
                      file=sys.stderr)

    def head_dim(self, il):
        return self.hd_swa if self.is_swa[il] else self.hd_full


def proportional_rope_factors(hd_full, partial=0.25):
    """The frequency factors spec §2.5 prescribes for full layers: 1 on the first
    partial*hd/2 pairs, 1e30 (angle ~ 0) on the rest."""
    n_keep = int(partial * hd_full) // 2
    factors = np.full(hd_full // 2, 1e30)
    factors[:n_keep] = 1.0
    return factors


def moe_route(router_logits, k, expert_scale):
    """Spec §2.3 step 7: softmax over all experts, top-k by probability (ties → lower id),
    renormalise over the k, then times the per-expert scale. → (ids [k], weights [k])."""
    prob = softmax(router_logits)
    ids = np.argsort(-prob, kind="stable")[:k]
    w = prob[ids] / np.sum(prob[ids])
    if expert_scale is not None:
        w = w * expert_scale[ids]
    return ids, w


def image_groups_mask(n_tokens, media):
    """[Tq, Tk] bool: query and key are soft tokens of the same image."""
    same = np.zeros((n_tokens, n_tokens), dtype=bool)
    for first, emb, kind in media:
        if kind == "image":
            same[first:first + len(emb), first:first + len(emb)] = True
    return same


def forward_gemma4(f, ids, dump_experts=None, kv_type="none", media=(), bidirectional_vision=False,
                   capture=None):
    """All-position logits [T, V]. capture: an optional dict that receives the state another
    model reads from this pass (reference_assistant.py's drafter): "config" (Gemma4Config), "kv"
    (KV-owning layer -> (k, v) as cached, [T, nkv, hd], after kv_round), "attn_in" (layer ->
    its attention input RMSNorm(h; attn_norm), [T, H]), "hidden" (the final-norm output before
    the LM head and softcap, [T, H]). It does not change the logits."""
    c = Gemma4Config(f)
    H, L, P, nh = c.n_embd, c.n_layer, c.n_ple, c.n_head
    n_tokens = len(ids)
    pos = np.arange(n_tokens, dtype=np.float64)
    t = lambda il, n: f.tensor(f"blk.{il}.{n}")                  # noqa: E731
    opt = lambda il, n: f.tensor(f"blk.{il}.{n}") if f.has(f"blk.{il}.{n}") else None  # noqa: E731

    # Full-layer RoPE frequency factors: rope_freqs when present (spec §2.5), else the rule.
    if f.has("rope_freqs.weight"):
        freq_factors = f.tensor("rope_freqs.weight")
        expected = proportional_rope_factors(c.hd_full)
        if freq_factors.shape != expected.shape or not np.allclose(freq_factors, expected, rtol=1e-6):
            print("warning: rope_freqs differs from spec §2.5's proportional factors (0.25)", file=sys.stderr)
    else:
        freq_factors = proportional_rope_factors(c.hd_full)

    # §2.1 input embedding, scaled by sqrt(H) (exact, as llama.cpp's fp32 sqrtf; not bf16-rounded).
    embd = f.tensor("token_embd.weight")                         # [V, H]
    x0 = embd[ids] * math.sqrt(H)                                # [T, H]
    # Soft tokens: their medium's embeddings, unscaled; their ids become pad for the PLE table.
    ple_ids = ids.copy()
    for first, emb, kind in media:
        x0[first:first + len(emb)] = emb
        ple_ids[first:first + len(emb)] = int(f.get("tokenizer.ggml.padding_token_id", 0))

    # §2.2 per-layer inputs p [T, L, P].
    ple = None
    if P > 0:
        z = f.tensor("per_layer_token_embd.weight")[ple_ids].reshape(n_tokens, L, P) * math.sqrt(P)
        proj = linear(f.tensor("per_layer_model_proj.weight"), x0) * H ** -0.5
        proj = rmsnorm(proj.reshape(n_tokens, L, P), f.tensor("per_layer_proj_norm.weight"), c.eps)
        ple = (proj + z) * 2 ** -0.5

    h = x0
    kv_cache = {}                                                # layer -> (k, v), [T, nkv, hd]
    for il in range(L):
        hd, nkv = c.head_dim(il), c.n_head_kv[il]
        swa = c.is_swa[il]
        if swa:
            rope = lambda x: rope_rotate_half(x, pos, c.n_rot_swa, c.theta_swa)            # noqa: E731
        else:
            rope = lambda x: rope_rotate_half(x, pos, c.n_rot_full, c.theta_full, freq_factors)  # noqa: E731

        # §2.3 steps 1–2: norm, query with per-head q-norm, RoPE.
        a = rmsnorm(h, t(il, "attn_norm.weight"), c.eps)
        if capture is not None:
            capture.setdefault("attn_in", {})[il] = a
        q = linear(t(il, "attn_q.weight"), a).reshape(n_tokens, nh, hd)
        q = rope(rmsnorm(q, t(il, "attn_q_norm.weight"), c.eps))

        # Step 3: own K/V, or the source layer's (§1.3); shared layers never read attn_k/v.
        if c.kv_src[il] == il:
            k_raw = linear(t(il, "attn_k.weight"), a).reshape(n_tokens, nkv, hd)
            w_v = opt(il, "attn_v.weight")
            # No attn_v (k_eq_v): V is the raw K projection, before norm and RoPE.
            v_raw = k_raw if w_v is None else linear(w_v, a).reshape(n_tokens, nkv, hd)
            k = rope(rmsnorm(k_raw, t(il, "attn_k_norm.weight"), c.eps))
            v = rmsnorm(v_raw, None, c.eps)                       # weightless V-norm
            kv_cache[il] = (kv_round(k, kv_type), kv_round(v, kv_type))
        k, v = kv_cache[c.kv_src[il]]
        if k.shape[1:] != (nkv, hd):
            raise ValueError(f"layer {il}: KV source {c.kv_src[il]} has shape {k.shape[1:]}")

        # Steps 4–6: attention with scale 1.0, masks per §2.6, output, post-norm, residual.
        mask = causal_mask(n_tokens, c.window if swa else None)
        if swa and bidirectional_vision:
            mask = mask | image_groups_mask(n_tokens, media)
        o = attention(q, k, v, mask, 1.0)
        h_mid = h + rmsnorm(linear(t(il, "attn_output.weight"), o), t(il, "post_attention_norm.weight"), c.eps)

        # Step 7: dense GeGLU MLP, plus the MoE branch when the layer has a router.
        fin = rmsnorm(h_mid, t(il, "ffn_norm.weight"), c.eps)
        d = linear(t(il, "ffn_down.weight"),
                   gelu_tanh(linear(t(il, "ffn_gate.weight"), fin)) * linear(t(il, "ffn_up.weight"), fin))
        if f.has(f"blk.{il}.ffn_gate_inp.weight"):
            d = moe_ffn(f, c, il, h_mid, d, dump_experts)
        h = h_mid + rmsnorm(d, t(il, "post_ffw_norm.weight"), c.eps)

        # Step 8: PLE injection.
        if ple is not None:
            g = gelu_tanh(linear(t(il, "inp_gate.weight"), h)) * ple[:, il, :]
            h = h + rmsnorm(linear(t(il, "proj.weight"), g), t(il, "post_norm.weight"), c.eps)

        # Step 9: the layer scalar multiplies the whole residual stream.
        scale = opt(il, "layer_output_scale.weight")
        if scale is not None:
            h = h * scale.reshape(())

    # §2.4 final norm, tied output, softcap.
    y = rmsnorm(h, f.tensor("output_norm.weight"), c.eps)
    if capture is not None:
        capture.update(config=c, kv=kv_cache, hidden=y)
    out_w = f.tensor("output.weight") if f.has("output.weight") else embd
    logits = linear(out_w, y)
    if c.softcap:
        logits = c.softcap * np.tanh(logits / c.softcap)
    return logits


def moe_ffn(f, c, il, h_mid, d_dense, dump_experts):
    """Spec §2.3 step 7, MoE half: returns d1 + d2 for every token."""
    t = lambda n: f.tensor(f"blk.{il}.{n}")                      # noqa: E731
    H = c.n_embd
    d1 = rmsnorm(d_dense, t("post_ffw_norm_1.weight"), c.eps)
    # Router input is h_mid through a weightless norm, 1/sqrt(H) and the learned scale.
    r = rmsnorm(h_mid, None, c.eps) * H ** -0.5 * t("ffn_gate_inp.scale")
    router_logits = linear(t("ffn_gate_inp.weight"), r)          # [T, E]
    expert_scale = t("ffn_down_exps.scale") if f.has(f"blk.{il}.ffn_down_exps.scale") else None
    e_in = rmsnorm(h_mid, t("pre_ffw_norm_2.weight"), c.eps)
    if f.has(f"blk.{il}.ffn_gate_up_exps.weight"):
        gate_up = t("ffn_gate_up_exps.weight")                   # [E, 2F, H]: gate rows first
        n_ff = gate_up.shape[1] // 2
        gate, up = gate_up[:, :n_ff, :], gate_up[:, n_ff:, :]
    else:
        gate, up = t("ffn_gate_exps.weight"), t("ffn_up_exps.weight")   # [E, F, H] each
    down = t("ffn_down_exps.weight")                             # [E, H, F]
    m = np.zeros_like(h_mid)
    for ti in range(h_mid.shape[0]):
        ids, w = moe_route(router_logits[ti], c.n_expert_used, expert_scale)
        if dump_experts is not None:
            dump_experts.write(f"layer {il} token {ti} ids {','.join(str(int(e)) for e in ids)} "
                               f"weights {','.join(f'{x:.9g}' for x in w)}\n")
        for e, we in zip(ids, w):
            y = down[e] @ (gelu_tanh(gate[e] @ e_in[ti]) * (up[e] @ e_in[ti]))
            m[ti] += we * y
    d2 = rmsnorm(m, t("post_ffw_norm_2.weight"), c.eps)
    return d1 + d2


# ----------------------------------------------------------------------------------------------
# LoRA: merged weights

class MergedLora:
    """The base model's tensors with a LoRA adapter merged in: W' = W + s · B @ A for every W the
    adapter pairs (tensors W.lora_a, numpy [rank, n_in], and W.lora_b, [n_out, rank], as
    llama.cpp's convert_lora_to_gguf.py writes them), s = scale · alpha / rank (alpha 0 or
    absent: s = scale). Written from the LoRA definition (W + B A scaled by alpha / r) and that
    file layout, not from headroom's code; everything else reads through to the base file."""

    def __init__(self, base, adapter_path, scale):
        self.base = base
        a = GgufFile(adapter_path)
        if a.get("general.type") != "adapter" or a.get("adapter.type") != "lora":
            raise ValueError(f"{adapter_path} is not a LoRA adapter")
        if a.get("general.architecture") != base.get("general.architecture"):
            raise ValueError(f"{adapter_path} is for another architecture")
        alpha = float(a.get("adapter.lora.alpha", 0.0))
        self.delta = {}
        for name in a.tensors:
            if not name.endswith(".lora_a"):
                continue
            w = name[:-len(".lora_a")]
            A, B = a.tensor(name), a.tensor(w + ".lora_b")          # [r, in], [out, r]
            rank = A.shape[0]
            s = scale * alpha / rank if alpha else scale
            self.delta[w] = s * (B @ A)

    def get(self, key, default=None):
        return self.base.get(key, default)

    def has(self, name):
        return self.base.has(name)

    def tensor(self, name):
        w = self.base.tensor(name)
        return w + self.delta[name] if name in self.delta else w


def read_media(spec, n_tokens, n_embd):
    """--media DUMP:FIRST:KIND → (first, embeddings [n, H], kind)."""
    path, first, kind = spec.rsplit(":", 2)
    if kind not in ("image", "audio"):
        raise ValueError(f"--media {spec}: the kind must be image or audio")
    emb = GgufFile(path).tensor("projected").astype(np.float64)
    first = int(first)
    if emb.ndim != 2 or emb.shape[1] != n_embd or first < 0 or first + len(emb) > n_tokens:
        raise ValueError(f"--media {spec}: {emb.shape} embeddings at {first} do not fit "
                         f"{n_tokens} tokens of width {n_embd}")
    return first, emb, kind


def forward(path, ids, dump_experts=None, kv_type="none", media=(), bidirectional_vision=False,
            lora=None):
    f = GgufFile(path)
    if lora:
        adapter, _, scale = lora.partition(":")
        f = MergedLora(f, adapter, float(scale) if scale else 1.0)
    arch = f.get("general.architecture")
    ids = np.asarray(ids, dtype=np.int64)
    if arch == "llama":
        if media:
            raise ValueError("--media: only Gemma 4 takes media")
        return forward_llama(f, ids, kv_type)
    if arch == "gemma4":
        n_embd = int(f.get("gemma4.embedding_length"))
        media = [read_media(m, len(ids), n_embd) for m in media]
        return forward_gemma4(f, ids, dump_experts, kv_type, media, bidirectional_vision)
    raise ValueError(f"no reference forward pass for architecture {arch!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--ids", required=True, help="comma-separated token ids, evaluated from position 0")
    ap.add_argument("-o", "--output", help="all-position logits, float32 [n_tokens x n_vocab]")
    ap.add_argument("--kv-type", default="none", choices=["none", "f32", "f16", "q8_0"],
                    help="round cached K/V as a cache of this type stores them (default none: float64)")
    ap.add_argument("--dump-experts", action="store_true",
                    help="print the selected experts and weights per MoE layer and token")
    ap.add_argument("--lora", help="a LoRA adapter GGUF to merge, FILE[:SCALE] (scale 1 by default)")
    ap.add_argument("--media", action="append", default=[], metavar="DUMP:FIRST:KIND",
                    help="a medium's embeddings (reference_mm.py dump) at positions FIRST.. (image|audio)")
    ap.add_argument("--bidirectional-vision", action="store_true",
                    help="images' tokens see each other both ways on sliding layers (31B, 26B-A4B)")
    args = ap.parse_args()
    ids = [int(s) for s in args.ids.split(",") if s.strip()]
    logits = forward(args.model, ids, sys.stdout if args.dump_experts else None, args.kv_type,
                     args.media, args.bidirectional_vision, args.lora)
    if args.output:
        logits.astype("<f4").tofile(args.output)


if __name__ == "__main__":
    main()
