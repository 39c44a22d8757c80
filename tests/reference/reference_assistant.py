#!/usr/bin/python3
"""Reference drafter steps (float64 numpy) for Gemma 4's assistant (MTP) drafter, GGUF
architecture "gemma4-assistant", as llama.cpp runs it: a test oracle.

Written from docs/gemma4-assistant.md (§2 format, §3 one step as math, §4 how it is driven) and
../shared/specs/gemma4.md, reusing reference_model.py's blocks and its Gemma 4 target forward, and
without reading headroom's C++ code: when headroom and this disagree, one of them misread the note.

    reference_assistant.py TARGET.gguf DRAFTER.gguf --ids a,b,c,... --tokens t0,t1,... -o OUT.f32
        [--kv-type none|f32|f16|q8_0] [--hidden-out H.f32] [--summary]

The target has processed --ids at positions 0..P-1 (P ids) and its cache holds them (K after the
k-norm and RoPE, V after the V-norm, rounded as a cache of --kv-type stores them, as
reference_model.py does for the target itself). Step 0 drafts from token t0 (the token at
position P, as if the target had just sampled it) and h = the target's hidden state after its
final output norm at position P-1 (before the LM head and softcap). Step k >= 1 drafts from t_k
and the previous step's h_next. Every step queries position P (note §4: n_past, unchanged
during a round); no K/V is written for the drafter's tokens.

One step (note §3): x = W_pre [sqrt(N_b)·E_t[tok]; h] with E_t the TARGET's token_embd; per
drafter layer Q-only attention (scale 1, NeoX RoPE at P; full layers with rope_freqs) into the
cache of the last target layer that owns a cache of the drafter layer's type (sliding or full,
the target's KV sharing resolved), keys pos <= P-1 (full) or P-W < pos <= P-1 (sliding); post-
attention norm; gated GELU(tanh) FFN with its pre/post norms; the residual times
layer_output_scale; then y = RMSNorm(x; output_norm), logits = E_d y (drafter's own token_embd,
no softcap, whatever final_logit_softcapping says), h_next = W_post y.

OUT.f32: little-endian float32 logits [K x V_drafter]. --hidden-out: float32 [(K+1) x N_b], the
target's step-0 h first, then each step's h_next. Lines starting `warning:` on stderr say where
the drafter does not fit the target; exit status 2 when the misfit leaves the step undefined
(N_b, a head dim or KV-head count of a read layer, a token outside the target's vocabulary, a
type of layer the target has no cache for).
"""

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_reader import GgufFile  # noqa: E402
from reference_model import (Gemma4Config, attention, forward_gemma4, gelu_tanh, linear,  # noqa: E402
                             per_layer, proportional_rope_factors, rmsnorm, rope_rotate_half)

ARCH = "gemma4-assistant"


class Misfit(Exception):
    """The drafter and target disagree in a way that leaves the drafter step undefined."""


# ----------------------------------------------------------------------------------------------
# Which target layer a drafter layer reads (note §3.3 step 5, spec §1.3)

def read_layers(is_swa, n_shared):
    """→ ({True: sliding source, False: full source}, [warnings]) for a target with layer types
    is_swa and `n_shared` trailing KV-shared layers.

    The source of each type is the last target layer that OWNS a cache of that type (HF's
    shared_kv_states["sliding_attention"/"full_attention"]; the note's §6.1 "robust" choice).
    llama.cpp's share() instead takes target layer L-2 for sliding and L-1 for full drafter
    layers and follows the target's reuse map from there; warn where the two differ. A type
    with no owning layer maps to None."""
    L = len(is_swa)
    first_shared = L - n_shared
    src = {}
    for swa in (True, False):
        owners = [j for j in range(first_shared) if bool(is_swa[j]) == swa]
        src[swa] = owners[-1] if owners else None
    warnings = []
    for swa, fixed in ((True, L - 2), (False, L - 1)):
        kind = "sliding" if swa else "full"
        if fixed < 0:
            warnings.append(f"llama.cpp's rule reads target layer {fixed} for {kind} drafter layers, "
                            f"which does not exist")
            continue
        if bool(is_swa[fixed]) != swa:
            warnings.append(f"llama.cpp's rule reads target layer {fixed} for {kind} drafter layers, "
                            f"but that layer is {'sliding' if is_swa[fixed] else 'full'}")
            continue
        # Follow the target's reuse map (llama.cpp's fixed formula, spec §1.3).
        resolved = fixed
        if fixed >= first_shared:
            resolved = first_shared - 2 if swa else first_shared - 1
        if resolved != src[swa]:
            warnings.append(f"{kind} drafter layers: llama.cpp's rule reads target layer {fixed} -> "
                            f"{resolved}, the last {kind} cache-owning layer is {src[swa]} (used here)")
    return src, warnings


class AssistantConfig:
    """Hyperparameters of a gemma4-assistant GGUF (note §2), per drafter layer where they vary."""

    def __init__(self, f):
        g = lambda k, d=None: f.get(f"{ARCH}.{k}", d)            # noqa: E731
        self.n_layer = L = int(g("block_count"))
        self.n_embd = int(g("embedding_length"))                 # N_d
        n_out = g("embedding_length_out")
        if n_out is None:
            raise Misfit(f"{ARCH}.embedding_length_out is missing (required, note §2)")
        self.n_embd_out = int(n_out)                             # N_b
        self.n_nextn = int(g("nextn_predict_layers", L))
        self.n_shared = int(g("attention.shared_kv_layers", L))
        self.n_head = per_layer(g("attention.head_count"), L, "head_count")
        self.n_head_kv = per_layer(g("attention.head_count_kv", g("attention.head_count")), L,
                                   "head_count_kv")
        self.n_ff = per_layer(g("feed_forward_length"), L, "feed_forward_length")
        self.is_swa = [bool(b) for b in g("attention.sliding_window_pattern", [False] * L)]
        if len(self.is_swa) != L:
            raise Misfit("sliding_window_pattern length != block_count")
        self.hd_full = int(g("attention.key_length"))
        self.hd_swa = int(g("attention.key_length_swa", self.hd_full))
        if int(g("attention.value_length", self.hd_full)) != self.hd_full or \
                int(g("attention.value_length_swa", self.hd_swa)) != self.hd_swa:
            raise Misfit("value_length must equal key_length (note §2)")
        self.eps = float(g("attention.layer_norm_rms_epsilon", 1e-6))
        self.window = int(g("attention.sliding_window", 0))
        self.theta_full = float(g("rope.freq_base", 1e6))
        self.theta_swa = float(g("rope.freq_base_swa", 1e4))
        self.n_rot_full = int(g("rope.dimension_count", self.hd_full))
        self.n_rot_swa = int(g("rope.dimension_count_swa", self.hd_swa))

    def head_dim(self, il):
        return self.hd_swa if self.is_swa[il] else self.hd_full


class Drafter:
    """The drafter's tensors (dequantized once), its config, and which target layer each of its
    layers reads."""

    def __init__(self, f, target_config):
        self.f = f
        self.c = AssistantConfig(f)
        self._cache = {}
        self.src, self.rule_warnings = read_layers(target_config.is_swa, target_config.n_shared)
        if f.has("rope_freqs.weight"):
            self.freq_factors = self.t("rope_freqs.weight")
            self.freq_factors_from_file = True
        else:
            self.freq_factors = proportional_rope_factors(self.c.hd_full)
            self.freq_factors_from_file = False

    def t(self, name):
        if name not in self._cache:
            self._cache[name] = self.f.tensor(name)
        return self._cache[name]

    def layer_source(self, il):
        return self.src[self.c.is_swa[il]]


# ----------------------------------------------------------------------------------------------
# Fit checks

def check_fit(tf, tc, d, tokens):
    """→ (warnings, fatal): every way the drafter departs from the target, and whether one of them
    leaves the step undefined."""
    dc = d.c
    warnings = list(d.rule_warnings)
    fatal = False

    def warn(msg, undefined=False):
        nonlocal fatal
        warnings.append(msg)
        fatal |= undefined

    V_t = tf.tensors["token_embd.weight"].shape[1]
    V_d = d.f.tensors["token_embd.weight"].shape[1]
    if V_d != V_t:
        warn(f"vocabulary: the drafter's token_embd has {V_d} rows, the target's {V_t}")
    if tf.get("tokenizer.ggml.tokens") != d.f.get("tokenizer.ggml.tokens"):
        warn("vocabulary: tokenizer.ggml.tokens differ between drafter and target")
    bad = [t for t in tokens if not 0 <= t < V_t]
    if bad:
        warn(f"tokens {bad} are outside the target's vocabulary of {V_t}", undefined=True)
    if dc.n_embd_out != tc.n_embd:
        warn(f"N_b: embedding_length_out {dc.n_embd_out} != the target's embedding_length {tc.n_embd}",
             undefined=True)
    if dc.n_embd == dc.n_embd_out:
        warn(f"embedding_length == embedding_length_out == {dc.n_embd}: llama.cpp's loader refuses this")
    if dc.n_nextn != dc.n_layer:
        warn(f"nextn_predict_layers {dc.n_nextn} != block_count {dc.n_layer} (llama.cpp asserts equality)")
    if dc.n_shared != dc.n_layer:
        warn(f"shared_kv_layers {dc.n_shared} != block_count {dc.n_layer} (read, unused)")
    shapes = {"nextn.pre_projection.weight": (dc.n_embd, 2 * dc.n_embd_out),
              "nextn.post_projection.weight": (dc.n_embd_out, dc.n_embd),
              "token_embd.weight": (V_d, dc.n_embd), "output_norm.weight": (dc.n_embd,)}
    for il in range(dc.n_layer):
        hd, nh, nff = dc.head_dim(il), dc.n_head[il], dc.n_ff[il]
        shapes.update({f"blk.{il}.attn_q.weight": (nh * hd, dc.n_embd),
                       f"blk.{il}.attn_q_norm.weight": (hd,),
                       f"blk.{il}.attn_output.weight": (dc.n_embd, nh * hd),
                       f"blk.{il}.ffn_gate.weight": (nff, dc.n_embd),
                       f"blk.{il}.ffn_up.weight": (nff, dc.n_embd),
                       f"blk.{il}.ffn_down.weight": (dc.n_embd, nff)})
        for n in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"):
            shapes[f"blk.{il}.{n}.weight"] = (dc.n_embd,)
    for name, shape in shapes.items():
        if not d.f.has(name):
            warn(f"tensor {name} is missing", undefined=True)
        elif tuple(reversed(d.f.tensors[name].shape)) != shape:
            warn(f"tensor {name}: numpy shape {tuple(reversed(d.f.tensors[name].shape))}, "
                 f"expected {shape}", undefined=True)

    for il in range(dc.n_layer):
        swa = dc.is_swa[il]
        kind = "sliding" if swa else "full"
        src = d.layer_source(il)
        if src is None:
            warn(f"drafter layer {il} ({kind}): the target has no {kind} layer that owns a cache",
                 undefined=True)
            continue
        if dc.head_dim(il) != tc.head_dim(src):
            warn(f"drafter layer {il} ({kind}): head dim {dc.head_dim(il)} != {tc.head_dim(src)} of "
                 f"target layer {src}", undefined=True)
        if dc.n_head_kv[il] != tc.n_head_kv[src]:
            warn(f"drafter layer {il} ({kind}): head_count_kv {dc.n_head_kv[il]} != "
                 f"{tc.n_head_kv[src]} of target layer {src}", undefined=True)
        if dc.n_head_kv[il] <= 0 or dc.n_head[il] % dc.n_head_kv[il]:
            warn(f"drafter layer {il}: {dc.n_head[il]} query heads over {dc.n_head_kv[il]} KV heads",
                 undefined=True)

    if any(dc.is_swa):
        if dc.window != tc.window:
            warn(f"sliding_window {dc.window} != the target's {tc.window} (the drafter's is used; the "
                 f"target's sliding cache may not hold keys outside its own window)")
        if dc.window <= 0:
            warn("sliding_window missing or 0 on a drafter with sliding layers", undefined=True)
        if (dc.theta_swa, dc.n_rot_swa) != (tc.theta_swa, tc.n_rot_swa):
            warn(f"sliding RoPE (theta {dc.theta_swa}, n_rot {dc.n_rot_swa}) != the target's "
                 f"({tc.theta_swa}, {tc.n_rot_swa}); keys were roped with the target's")
    if not all(dc.is_swa):
        if (dc.theta_full, dc.n_rot_full) != (tc.theta_full, tc.n_rot_full):
            warn(f"full RoPE (theta {dc.theta_full}, n_rot {dc.n_rot_full}) != the target's "
                 f"({tc.theta_full}, {tc.n_rot_full}); keys were roped with the target's")
        if not d.freq_factors_from_file:
            warn("rope_freqs.weight missing: using spec §2.5's proportional factors")
        elif tf.has("rope_freqs.weight"):
            t_ff = tf.tensor("rope_freqs.weight")
            if t_ff.shape != d.freq_factors.shape or not np.array_equal(t_ff, d.freq_factors):
                warn("rope_freqs differs from the target's")
    if dc.eps != tc.eps:
        warn(f"layer_norm_rms_epsilon {dc.eps} != the target's {tc.eps}")
    return warnings, fatal


# ----------------------------------------------------------------------------------------------
# One drafter step (note §3)

def drafter_step(d, embd_t, kv, tok, h, P):
    """→ (logits [V_d], h_next [N_b]) for token `tok` and input row h [N_b] at query position P,
    attending to the target's cached kv {layer: (k, v) [P, nkv, hd]}."""
    dc = d.c
    t = d.t
    pos = np.array([float(P)])
    # §3.2 pre-projection: embedding (target's table, scaled by sqrt(N_b)) first, then h.
    e = embd_t[tok] * math.sqrt(dc.n_embd_out)
    z = np.concatenate([e, h])[None, :]                          # [1, 2 N_b]
    x = linear(t("nextn.pre_projection.weight"), z)              # [1, N_d]

    key_pos = np.arange(P)
    for il in range(dc.n_layer):
        swa = dc.is_swa[il]
        hd, nh = dc.head_dim(il), dc.n_head[il]
        b = lambda n: t(f"blk.{il}.{n}.weight")                  # noqa: E731
        # §3.3 steps 1–3: norm, Q with per-head q-norm, NeoX RoPE at position P.
        a = rmsnorm(x, b("attn_norm"), dc.eps)
        q = rmsnorm(linear(b("attn_q"), a).reshape(1, nh, hd), b("attn_q_norm"), dc.eps)
        if swa:
            q = rope_rotate_half(q, pos, dc.n_rot_swa, dc.theta_swa)
        else:
            q = rope_rotate_half(q, pos, dc.n_rot_full, dc.theta_full, d.freq_factors)
        # Steps 4–6: the target's K/V as cached; scale 1; keys before P, the last W-1 on sliding.
        k, v = kv[d.layer_source(il)]
        visible = key_pos <= P - 1
        if swa:
            visible &= P - key_pos < dc.window
        o = attention(q, k[:P], v[:P], visible[None, :], 1.0)
        # Step 7: post-attention norm, residual.
        x = x + rmsnorm(linear(b("attn_output"), o), b("post_attention_norm"), dc.eps)
        # Step 8: gated GELU(tanh) FFN between its norms.
        fin = rmsnorm(x, b("ffn_norm"), dc.eps)
        f = linear(b("ffn_down"), gelu_tanh(linear(b("ffn_gate"), fin)) * linear(b("ffn_up"), fin))
        # Step 9: residual, then the layer scalar on the whole stream.
        x = x + rmsnorm(f, b("post_ffw_norm"), dc.eps)
        if d.f.has(f"blk.{il}.layer_output_scale.weight"):
            x = x * b("layer_output_scale").reshape(())
    # §3.4: final norm; dense tied head, no softcap; post-projection of the normed y.
    y = rmsnorm(x, t("output_norm.weight"), dc.eps)
    logits = linear(t("token_embd.weight"), y)[0]
    h_next = linear(t("nextn.post_projection.weight"), y)[0]
    return logits, h_next


def run(target_path, drafter_path, ids, tokens, kv_type="none", warn=None):
    """→ (logits [K, V_d], hidden [K+1, N_b]). warn: called with each warning line's text.
    Raises Misfit when the step is undefined."""
    warn = warn or (lambda msg: print(f"warning: {msg}", file=sys.stderr))
    tf, df = GgufFile(target_path), GgufFile(drafter_path)
    if tf.get("general.architecture") != "gemma4":
        raise Misfit(f"{target_path}: architecture {tf.get('general.architecture')!r}, not 'gemma4'")
    if df.get("general.architecture") != ARCH:
        raise Misfit(f"{drafter_path}: architecture {df.get('general.architecture')!r}, not {ARCH!r}")
    if not ids:
        raise Misfit("--ids: the target must have processed at least one token")
    if not tokens:
        raise Misfit("--tokens: at least one step")
    tc = Gemma4Config(tf)
    d = Drafter(df, tc)
    warnings, fatal = check_fit(tf, tc, d, tokens)
    for msg in warnings:
        warn(msg)
    if fatal:
        raise Misfit("the drafter does not fit the target; the drafter step is undefined")

    P = len(ids)
    cap = {}
    forward_gemma4(tf, np.asarray(ids, dtype=np.int64), kv_type=kv_type, capture=cap)
    embd_t = tf.tensor("token_embd.weight")                      # [V, N_b]
    h = cap["hidden"][P - 1]                                     # after output_norm, before the head
    hidden = [h]
    logits = []
    for tok in tokens:
        lg, h = drafter_step(d, embd_t, cap["kv"], tok, h, P)
        logits.append(lg)
        hidden.append(h)
    return np.array(logits), np.array(hidden)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target")
    ap.add_argument("drafter")
    ap.add_argument("--ids", required=True, help="comma-separated token ids the target has processed (positions 0..P-1)")
    ap.add_argument("--tokens", required=True, help="comma-separated step tokens t0,t1,... (t0 at position P)")
    ap.add_argument("-o", "--output", required=True, help="logits, float32 [K x V]")
    ap.add_argument("--kv-type", default="none", choices=["none", "f32", "f16", "q8_0"],
                    help="round the target's cached K/V as a cache of this type stores them (default none: float64)")
    ap.add_argument("--hidden-out", help="float32 [(K+1) x N_b]: the target's step-0 h, then each step's h_next")
    ap.add_argument("--summary", action="store_true", help="print each step's argmax and max |logit| on stdout")
    args = ap.parse_args()
    ids = [int(s) for s in args.ids.split(",") if s.strip()]
    tokens = [int(s) for s in args.tokens.split(",") if s.strip()]
    try:
        logits, hidden = run(args.target, args.drafter, ids, tokens, args.kv_type)
    except Misfit as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    logits.astype("<f4").tofile(args.output)
    if args.hidden_out:
        hidden.astype("<f4").tofile(args.hidden_out)
    if args.summary:
        for k, (tok, lg) in enumerate(zip(tokens, logits)):
            print(f"step {k} token {tok} argmax {int(np.argmax(lg))} max|logit| {np.max(np.abs(lg)):.6g}")


if __name__ == "__main__":
    main()
