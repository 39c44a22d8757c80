#!/usr/bin/python3
"""Writes a tiny random Gemma 4 assistant (MTP) drafter GGUF, architecture "gemma4-assistant",
that fits a given (tiny) Gemma 4 target GGUF: a test fixture for reference_assistant.py.

    write_assistant.py TARGET.gguf -o DRAFTER.gguf [--seed 0] [--n-embd 48] [--n-layer 4]
        [--n-ff 96] [--type f32|f16|q8_0] [--output-norm-scale 1.0] [--no-softcap-key]
        [--oracle SEQ_FILE --oracle-input token|hidden]

Keys and tensors as docs/gemma4-assistant.md §2 lists them (prefix gemma4-assistant.):
embedding_length N_d = --n-embd; embedding_length_out N_b = the target's embedding_length;
block_count = nextn_predict_layers = shared_kv_layers = --n-layer; the target's context_length,
head dims (key/value_length, *_swa), sliding_window, layer_norm_rms_epsilon and rope.* keys;
sliding_window_pattern all sliding but the last layer (like the HF drafters); head_count the
target's query heads; head_count_kv a per-layer array, each drafter layer's value the KV-head
count of the target layer it reads (the last cache-owning target layer of its type); and
embedding_length_per_layer_input 0 and, unless --no-softcap-key, the target's
final_logit_softcapping (the converter writes both; llama.cpp reads neither: no softcap is ever
applied to draft logits). The target's tokenizer.* keys are copied byte for byte.

Tensors: token_embd {N_d, V}, output_norm, nextn.pre_projection {2 N_b, N_d},
nextn.post_projection {N_d, N_b}, rope_freqs (the target's values), and per layer attn_norm,
attn_q, attn_q_norm, attn_output, post_attention_norm, ffn_norm, ffn_gate, ffn_up, ffn_down,
post_ffw_norm, layer_output_scale {1}. Matrices N(0, 0.05) in --type (a matrix whose rows are
not whole 32-blocks falls back from q8_0 to f16, with a note on stderr); norms 1 + N(0, 0.1),
output_norm times --output-norm-scale; layer_output_scale uniform in [0.5, 1.5]; all f32.
Refuses (exit 2) a target that is not gemma4.

--oracle SEQ_FILE writes a drafter whose greedy step-0 pick agrees BY CONSTRUCTION with a known
greedy continuation, to test how a scheduler wires token, hidden state and position into the
drafter. SEQ_FILE is one line of comma-separated ids s_0..s_{n-1}: a prompt and the target's
greedy continuation. Every layer is a pass-through (attn_output and ffn_down zero, so both
post-norms give 0; layer_output_scale 1; the other layer weights random as usual), output_norm
is all ones, so y = RMSNorm(W_pre [sqrt(N_b) E_t[tok]; h]) exactly; every tensor is f32
whatever --type says. --oracle-input token: W_pre = [A, 0] (h ignored), f = first-successor map
of the sequence, drafter token_embd row j = sum over t with f[t] = j of 8 y(t)/|y(t)|, so a step
fed token t picks f[t]. --oracle-input hidden: W_pre = [0, B] (token ignored), h_i = the
reference target's post-norm hidden at position i (f32 cache), row s_{i+2} += 8 y_i/|y_i| with
y_i = RMSNorm(B h_i), so a step at P = i+1 fed h_{P-1} picks s_{P+1}. A and B are N(0, 1/N_b);
other rows are 0. Those sums alone fail where the y are correlated (the target's hidden states
share a large common direction, and a greedy loop sends many to one row): perceptron steps then
move rows until every y's pick beats all other rows by 2 sqrt(N_d) (a quarter of a lone row's
8 sqrt(N_d)); a line on stdout gives the steps and the margin. After writing,
reference_assistant.py's run() checks every position P = 1..n-2 (f32 cache; token: 3-step
chains following f) and prints how many agree; exit 1 if fewer than 90 % do.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_reader import GgufFile, _Cursor  # noqa: E402
from gguf_writer import GgufWriter  # noqa: E402
from reference_assistant import ARCH, Misfit, read_layers, run  # noqa: E402
from reference_model import forward_gemma4, per_layer, proportional_rope_factors, rmsnorm  # noqa: E402

ORACLE_SCALE = 8.0      # |row| per contributing y: logit margin ≈ 8·|y| = 8·sqrt(N_d) for a lone row
ORACLE_KV = "f32"       # the target cache the oracle's h and its check use
ORACLE_MIN_AGREE = 0.9
ORACLE_PASSES = 1000


def raw_metadata(path):
    """key -> the key's encoded value (u32 type, then the value) exactly as the file has it."""
    with open(path, "rb") as f:
        buf = f.read()
    cur = _Cursor(buf)
    cur.pos = 4 + 4                                              # magic, version
    cur.take("<Q")                                               # tensor count
    n_kv = cur.take("<Q")
    raw = {}
    for _ in range(n_kv):
        key = cur.string()
        start = cur.pos
        cur.value(cur.take("<I"))
        raw[key] = bytes(buf[start:cur.pos])
    return raw


def read_seq(path):
    """SEQ_FILE: one line of comma-separated token ids."""
    with open(path) as f:
        text = f.read().strip()
    if "\n" in text:
        raise ValueError(f"{path}: more than one line")
    return [int(x) for x in text.split(",") if x.strip()]


def first_successors(seq):
    """f[s_i] = s_{i+1} for the first occurrence of each s_i (i < n-1)."""
    f = {}
    for a, b in zip(seq, seq[1:]):
        f.setdefault(a, b)
    return f


def oracle_rows(V, N_d, ys, targets):
    """Drafter token_embd [V, N_d] under which each y's greedy pick is its target, and a note.

    Row j starts as the sum over the y with target j of ORACLE_SCALE·y/|y| (a lone row's margin
    is then 8·|y| = 8·sqrt(N_d)). Correlated y (the target's hidden states share a large common
    direction; a greedy loop sends many of them to one row) can make a row of many summed y win
    everywhere, so perceptron steps follow: while some y's target logit does not beat every other
    row by ORACLE_SCALE·sqrt(N_d)/4, add y/|y| to its target row and subtract it from the best
    other row (at most ORACLE_PASSES passes: a y that nearly coincides with a y of another
    target cannot be separated; the check then reports its position)."""
    Y = np.asarray(ys, dtype=np.float64)
    yn = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    tg = np.asarray(targets)
    E = np.zeros((V, N_d))
    np.add.at(E, tg, ORACLE_SCALE * yn)
    want = ORACLE_SCALE * np.sqrt(N_d) / 4
    rows = np.arange(len(tg))
    steps = 0
    for _ in range(ORACLE_PASSES):
        L = Y @ E.T
        wanted = L[rows, tg].copy()
        L[rows, tg] = -np.inf
        rival = L.argmax(axis=1)
        low = np.flatnonzero(wanted - L[rows, rival] < want)
        if not len(low):
            break
        for i in low:                                            # one y at a time: classic perceptron
            L_i = E @ Y[i]
            w_i = L_i[tg[i]]
            L_i[tg[i]] = -np.inf
            k = int(L_i.argmax())
            if w_i - L_i[k] < want:
                E[tg[i]] += yn[i]
                E[k] -= yn[i]
                steps += 1
    L = Y @ E.T
    wanted = L[rows, tg].copy()
    L[rows, tg] = -np.inf
    margin = wanted - L.max(axis=1)
    note = (f"{len(tg)} y vectors onto {len(set(tg.tolist()))} rows; {steps} perceptron steps; float64 margin "
            f"min {margin.min():.4g} (wanted >= {want:.4g}); max |row| {np.linalg.norm(E, axis=1).max():.4g}")
    return E, note


def oracle_weights(mode, t, seq, N_b, N_d, eps, rng):
    """→ (W_pre [N_d, 2 N_b], E_d [V, N_d], f for the check, a note), for --oracle-input mode.
    y is computed from the float32 W_pre as stored, in float64, with output_norm = ones."""
    M = rng.normal(0.0, 1.0 / np.sqrt(N_b), size=(N_d, N_b)).astype(np.float32)
    zero = np.zeros((N_d, N_b), dtype=np.float32)
    V = t.tensors["token_embd.weight"].shape[1]
    Mf = M.astype(np.float64)
    if mode == "token":
        W_pre = np.concatenate([M, zero], axis=1)                # [A, 0]: h ignored
        f = first_successors(seq)
        embd = t.tensor("token_embd.weight")                     # [V, N_b], dequantized
        toks = sorted(f)
        ys = [rmsnorm(Mf @ (np.sqrt(N_b) * embd[tok]), None, eps) for tok in toks]
        E, note = oracle_rows(V, N_d, ys, [f[tok] for tok in toks])
        return W_pre, E, f, note
    W_pre = np.concatenate([zero, M], axis=1)                    # [0, B]: token ignored
    cap = {}
    forward_gemma4(t, np.asarray(seq, dtype=np.int64), kv_type=ORACLE_KV, capture=cap)
    hid = cap["hidden"]                                          # [n, N_b]: h_i at position i
    ys = [rmsnorm(Mf @ hid[i], None, eps) for i in range(len(seq) - 2)]
    E, note = oracle_rows(V, N_d, ys, seq[2:])
    return W_pre, E, None, note


def oracle_check(target, drafter, mode, seq, f):
    """Runs reference_assistant.run on every position; → (agreeing, checked)."""
    seen = set()

    def warn(msg):
        if msg not in seen:
            seen.add(msg)
            print(f"warning: {msg}", file=sys.stderr)

    n = len(seq)
    good = total = 0
    margins = []
    bad = []
    for P in range(1, n - 1):
        if mode == "token":
            chain = [seq[P]]                                      # up to 3 steps following f
            while len(chain) < 3 and chain[-1] in f:
                chain.append(f[chain[-1]])
            tokens = chain if chain[-1] in f else chain[:-1]      # step k must have f[t_k]
            expect = [f[tok] for tok in tokens]
        else:
            tokens, expect = [seq[P]], [seq[P + 1]]
        logits, _ = run(target, drafter, seq[:P], tokens, kv_type=ORACLE_KV, warn=warn)
        for k, (lg, want) in enumerate(zip(logits, expect)):
            got = int(np.argmax(lg))
            total += 1
            others = np.delete(lg, want)
            margins.append(float(lg[want] - others.max()))
            if got == want:
                good += 1
            else:
                bad.append(f"P={P} step {k} token {tokens[k]}: argmax {got} (logit {lg[got]:.4g}), "
                           f"expected {want} (logit {lg[want]:.4g})")
    for line in bad:
        print(f"oracle mismatch: {line}", file=sys.stderr)
    what = "steps (3-step chains following f)" if mode == "token" else "positions (step 0)"
    print(f"oracle {mode}: {good}/{total} {what} agree over P = 1..{n - 2}; min margin "
          f"(expected logit minus best other) {min(margins):.4g}, max {max(margins):.4g}")
    return good, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-embd", type=int, default=48, help="N_d, the drafter's hidden size")
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-ff", type=int, default=96)
    ap.add_argument("--type", default="f32", choices=["f32", "f16", "q8_0"], help="type of the 2-D matrices")
    ap.add_argument("--output-norm-scale", type=float, default=1.0,
                    help="multiplies output_norm's weights (larger logits, so that bugs show)")
    ap.add_argument("--no-softcap-key", action="store_true",
                    help="do not write final_logit_softcapping (written by default; never applied)")
    ap.add_argument("--oracle", metavar="SEQ_FILE",
                    help="write a drafter whose greedy pick follows SEQ_FILE (one line of comma-separated "
                         "ids: a prompt and the target's greedy continuation) by construction: pass-through "
                         "layers, output_norm ones, all tensors f32 whatever --type says; then check it with "
                         "reference_assistant.py (f32 cache) and exit 1 if under 90%% of positions agree")
    ap.add_argument("--oracle-input", choices=["token", "hidden"],
                    help="with --oracle: token = the pick depends on the input token only (first successor in "
                         "SEQ_FILE); hidden = on h only (the step at P fed h_{P-1} picks s_{P+1})")
    args = ap.parse_args()
    if (args.oracle is None) != (args.oracle_input is None):
        ap.error("--oracle and --oracle-input go together")
    seq = None
    if args.oracle:
        try:
            seq = read_seq(args.oracle)
        except (OSError, ValueError) as e:
            print(f"error: --oracle: {e}", file=sys.stderr)
            sys.exit(2)
        if len(seq) < 3:
            print(f"error: --oracle: {args.oracle} has {len(seq)} ids; at least 3 are needed", file=sys.stderr)
            sys.exit(2)
        if args.type != "f32":
            print(f"note: --oracle writes every tensor as f32; --type {args.type} ignored", file=sys.stderr)
            args.type = "f32"

    t = GgufFile(args.target)
    arch = t.get("general.architecture")
    if arch != "gemma4":
        print(f"error: {args.target}: architecture {arch!r}; a gemma4-assistant drafter needs a gemma4 target",
              file=sys.stderr)
        sys.exit(2)
    g = lambda k, d=None: t.get(f"gemma4.{k}", d)                # noqa: E731
    L_t = int(g("block_count"))
    N_b = int(g("embedding_length"))
    is_swa_t = [bool(b) for b in g("attention.sliding_window_pattern")]
    n_shared_t = int(g("attention.shared_kv_layers", 0))
    head_t = per_layer(g("attention.head_count"), L_t, "head_count")
    head_kv_t = per_layer(g("attention.head_count_kv", g("attention.head_count")), L_t, "head_count_kv")
    hd_full = int(g("attention.key_length"))
    hd_swa = int(g("attention.key_length_swa", hd_full))
    V = t.tensors["token_embd.weight"].shape[1]                  # ggml {N_b, V}
    if seq is not None and not all(0 <= x < V for x in seq):
        print(f"error: --oracle: ids outside the target's vocabulary of {V}", file=sys.stderr)
        sys.exit(2)

    L, N_d, n_ff = args.n_layer, args.n_embd, args.n_ff
    if L < 1:
        print("error: --n-layer must be at least 1", file=sys.stderr)
        sys.exit(2)
    if N_d == N_b:
        print(f"warning: --n-embd {N_d} equals the target's embedding_length; llama.cpp's loader "
              f"refuses such a drafter", file=sys.stderr)
    is_swa = [True] * (L - 1) + [False]
    src, rule_warnings = read_layers(is_swa_t, n_shared_t)
    for msg in rule_warnings:
        print(f"warning: {msg}", file=sys.stderr)
    for swa in set(is_swa):
        if src[swa] is None:
            print(f"error: the target has no {'sliding' if swa else 'full'} layer that owns a cache",
                  file=sys.stderr)
            sys.exit(2)
    # Per drafter layer: the target layer it reads, and that layer's heads.
    reads = [src[s] for s in is_swa]
    heads = [head_t[j] for j in reads]
    heads_kv = [head_kv_t[j] for j in reads]

    w = GgufWriter()
    w.add("general.architecture", ARCH)
    w.add("general.name", f"tiny gemma4-assistant drafter (seed {args.seed}, {args.type}"
                          + (f", oracle {args.oracle_input})" if seq else ")"))
    a = lambda k, v, kind: w.add(f"{ARCH}.{k}", v, kind=kind)    # noqa: E731
    a("context_length", int(g("context_length")), "u32")
    a("embedding_length", N_d, "u32")
    a("embedding_length_out", N_b, "u32")
    a("block_count", L, "u32")
    a("nextn_predict_layers", L, "u32")
    a("feed_forward_length", n_ff, "u32")
    if len(set(heads)) == 1:
        a("attention.head_count", heads[0], "u32")
    else:
        a("attention.head_count", heads, "array:u32")
    a("attention.head_count_kv", heads_kv, "array:u32")
    a("attention.key_length", hd_full, "u32")
    a("attention.value_length", int(g("attention.value_length", hd_full)), "u32")
    a("attention.key_length_swa", hd_swa, "u32")
    a("attention.value_length_swa", int(g("attention.value_length_swa", hd_swa)), "u32")
    a("attention.sliding_window", int(g("attention.sliding_window")), "u32")
    a("attention.sliding_window_pattern", is_swa, "array:bool")
    a("attention.shared_kv_layers", L, "u32")
    a("attention.layer_norm_rms_epsilon", float(g("attention.layer_norm_rms_epsilon", 1e-6)), "f32")
    a("rope.freq_base", float(g("rope.freq_base", 1e6)), "f32")
    a("rope.freq_base_swa", float(g("rope.freq_base_swa", 1e4)), "f32")
    a("rope.dimension_count", int(g("rope.dimension_count", hd_full)), "u32")
    a("rope.dimension_count_swa", int(g("rope.dimension_count_swa", hd_swa)), "u32")
    a("embedding_length_per_layer_input", 0, "u32")
    if not args.no_softcap_key and g("final_logit_softcapping") is not None:
        a("final_logit_softcapping", float(g("final_logit_softcapping")), "f32")
    for key, raw in raw_metadata(args.target).items():
        if key.startswith("tokenizer."):
            w.kv.append((key, raw))                              # verbatim, type included

    rng = np.random.default_rng(args.seed)
    fallback = []
    tensors = {}                                                 # name -> [array, type], in file order

    def matrix(name, n_out, n_in):
        """numpy [n_out, n_in] = ggml {n_in, n_out}."""
        m = rng.normal(0.0, 0.05, size=(n_out, n_in)).astype(np.float32)
        kind = args.type
        if kind == "q8_0" and n_in % 32:
            kind = "f16"
            fallback.append(name)
        tensors[name] = [m, kind]

    def norm(name, n, scale=1.0):
        tensors[name] = [((1.0 + rng.normal(0.0, 0.1, size=n)) * scale).astype(np.float32), "f32"]

    matrix("token_embd.weight", V, N_d)
    norm("output_norm.weight", N_d, args.output_norm_scale)
    matrix("nextn.pre_projection.weight", N_d, 2 * N_b)
    matrix("nextn.post_projection.weight", N_b, N_d)
    freqs = t.tensor("rope_freqs.weight") if t.has("rope_freqs.weight") else proportional_rope_factors(hd_full)
    tensors["rope_freqs.weight"] = [freqs.astype(np.float32), "f32"]
    for il in range(L):
        hd = hd_swa if is_swa[il] else hd_full
        nh = heads[il]
        p = f"blk.{il}."
        norm(p + "attn_norm.weight", N_d)
        matrix(p + "attn_q.weight", nh * hd, N_d)
        norm(p + "attn_q_norm.weight", hd)
        matrix(p + "attn_output.weight", N_d, nh * hd)
        norm(p + "post_attention_norm.weight", N_d)
        norm(p + "ffn_norm.weight", N_d)
        matrix(p + "ffn_gate.weight", n_ff, N_d)
        matrix(p + "ffn_up.weight", n_ff, N_d)
        matrix(p + "ffn_down.weight", N_d, n_ff)
        norm(p + "post_ffw_norm.weight", N_d)
        tensors[p + "layer_output_scale.weight"] = [rng.uniform(0.5, 1.5, size=1).astype(np.float32), "f32"]
    if seq is not None:
        # Drawn after the usual tensors, so that those stay what the seed gives without --oracle.
        eps = float(g("attention.layer_norm_rms_epsilon", 1e-6))
        W_pre, E_d, f_map, note = oracle_weights(args.oracle_input, t, seq, N_b, N_d, eps, rng)
        print(f"oracle {args.oracle_input}: {note}")
        tensors["token_embd.weight"][0] = E_d.astype(np.float32)
        tensors["nextn.pre_projection.weight"][0] = W_pre
        tensors["output_norm.weight"][0] = np.ones(N_d, dtype=np.float32)
        for il in range(L):
            p = f"blk.{il}."
            for name in ("attn_output", "ffn_down"):             # RMSNorm(0; w) = 0: pass-through
                tensors[p + name + ".weight"][0] = np.zeros_like(tensors[p + name + ".weight"][0])
            tensors[p + "layer_output_scale.weight"][0] = np.ones(1, dtype=np.float32)
    for name, (array, kind) in tensors.items():
        w.tensor(name, array, kind)
    if fallback:
        print(f"note: {len(fallback)} matrices have rows that are not whole 32-blocks and are f16, not q8_0: "
              f"{', '.join(fallback)}", file=sys.stderr)
    w.write(args.output)
    if seq is not None:
        try:
            good, total = oracle_check(args.target, args.output, args.oracle_input, seq, f_map)
        except Misfit as e:
            print(f"error: oracle check: {e}", file=sys.stderr)
            sys.exit(2)
        if good < ORACLE_MIN_AGREE * total:
            print(f"error: oracle check: only {good}/{total} agree (need {ORACLE_MIN_AGREE:.0%})", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
