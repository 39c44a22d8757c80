#!/usr/bin/python3
"""Reference (float64 numpy) of Gemma 4's image and audio preprocessing and encoders: a test
oracle for headroom's src/mm.

Written from the published architecture — Hugging Face transformers' Gemma 4 files
(image_processing_pil_gemma4.py, feature_extraction_gemma4.py, processing_gemma4.py,
modeling_gemma4.py: Gemma4VisionModel, Gemma4AudioModel, Gemma4MultimodalEmbedder) and
llama.cpp's converter for the GGUF layout — without reading headroom's C++. Images are decoded
and resized by PIL, as the reference image processor does. It favours plainness: the audio
attention is the blocked formulation of the reference (blocks, context windows, relative shift),
not a reformulation.

    reference_mm.py image MMPROJ IMAGE --image-tokens 280 -o dump.gguf
    reference_mm.py audio MMPROJ WAV -o dump.gguf
    reference_mm.py preprocess IMAGE... --budgets 70,280 [--patch-size 16] -o dump.gguf

The dump is a GGUF file of named float32 tensors, one per stage (numpy [rows, cols] → ggml
{cols, rows}): image: pixels [H*W*3 as uint8 values], patches, patch_embd, blk.N.out, pooled,
projected; audio: samples, mel, subsampled, blk.N.out, encoded, projected; preprocess, per image
(by file name) and budget: NAME.rgb (PIL's decode), NAME.B.pixels (resized), NAME.B.patches.
"""

import argparse
import math
import os
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_reader import GgufFile  # noqa: E402
from gguf_writer import GgufWriter  # noqa: E402

SUPPORTED_SOFT_TOKENS = (70, 140, 280, 560, 1120)
POOLING_KERNEL = 3          # Gemma4VisionConfig.pooling_kernel_size
VISION_ROPE_THETA = 100.0   # Gemma4VisionConfig default rope_theta
# Gemma4AudioConfig defaults (not stored in the GGUF).
AUDIO_CHUNK, AUDIO_CONTEXT_LEFT, AUDIO_CONTEXT_RIGHT = 12, 13, 0
AUDIO_LOGIT_CAP, AUDIO_INVALID_LOGIT = 50.0, -1.0e9
AUDIO_RESIDUAL_WEIGHT = 0.5
AUDIO_EPS = 1e-6
# Gemma4AudioFeatureExtractor defaults.
SAMPLE_RATE, FRAME_MS, HOP_MS, N_MEL, MEL_FLOOR = 16000, 20.0, 10.0, 128, 1e-3
MAX_SAMPLES, PAD_MULTIPLE = 480_000, 128


# ----------------------------------------------------------------------------------------------
# Shared blocks

def rmsnorm(x, weight, eps):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if weight is None else y * weight


def layernorm(x, weight, eps):
    """nn.LayerNorm over the last axis, weight only (bias=False)."""
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * weight


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


class Weights:
    def __init__(self, f):
        self.f = f

    def __call__(self, name):
        return self.f.tensor(name)

    def has(self, name):
        return self.f.has(name)

    def linear(self, base, x):
        """Gemma4ClippableLinear: clamp the input, x @ W.T, clamp the output (bounds optional)."""
        def bound(suffix, default):
            n = f"{base}.{suffix}"
            return float(self.f.tensor(n).reshape(-1)[0]) if self.f.has(n) else default
        x = np.clip(x, bound("input_min", -np.inf), bound("input_max", np.inf))
        y = x @ self.f.tensor(base + ".weight").T
        return np.clip(y, bound("output_min", -np.inf), bound("output_max", np.inf))


# ----------------------------------------------------------------------------------------------
# Images (image_processing_pil_gemma4.py)

def load_rgb(path):
    """PIL decode then convert("RGB") (transformers' convert_to_rgb): [H, W, 3] uint8."""
    from PIL import Image
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def target_size(height, width, patch, max_patches, k):
    """get_aspect_ratio_preserving_size: the largest size, multiples of k*patch on each side,
    that keeps the aspect ratio and holds at most max_patches patches."""
    total_px = height * width
    target_px = max_patches * patch ** 2
    factor = math.sqrt(target_px / total_px)
    side = k * patch
    th = int(math.floor(factor * height / side)) * side
    tw = int(math.floor(factor * width / side)) * side
    if th == 0 and tw == 0:
        raise ValueError("image resizes to 0x0")
    max_side = (max_patches // k ** 2) * side
    if th == 0:
        th, tw = side, min(int(math.floor(width / height)) * side, max_side)
    elif tw == 0:
        tw, th = side, min(int(math.floor(height / width)) * side, max_side)
    if th * tw > target_px:
        raise ValueError("resized image exceeds the patch budget")
    return th, tw


def preprocess_image(path, patch, tokens):
    """→ resized RGB uint8 [h, w, 3], patches [N, p*p*3] in [0, 1] (HF order: row, column,
    channel), positions [N, 2] (x, y)."""
    from PIL import Image
    rgb = load_rgb(path)
    h, w = rgb.shape[:2]
    th, tw = target_size(h, w, patch, tokens * POOLING_KERNEL ** 2, POOLING_KERNEL)
    if (th, tw) != (h, w):
        rgb = np.asarray(Image.fromarray(rgb).resize((tw, th), resample=Image.BICUBIC))
    img = rgb.astype(np.float64).transpose(2, 0, 1) / 255.0           # [3, h, w]
    nh, nw = th // patch, tw // patch
    patches = img.reshape(3, nh, patch, nw, patch).transpose(1, 3, 2, 4, 0).reshape(nh * nw, -1)
    gx, gy = np.meshgrid(np.arange(nw), np.arange(nh), indexing="xy")
    positions = np.stack([gx, gy], axis=-1).reshape(nh * nw, 2)
    return rgb, patches, positions


# ----------------------------------------------------------------------------------------------
# Vision encoder (Gemma4VisionModel + Gemma4MultimodalEmbedder)

def rope_2d(x, positions, theta):
    """apply_multidimensional_rope: the head splits in halves, x rotated by position x, y by y;
    within a half rotate-half pairing with inv_freq = theta^(-2i/half). x [N, heads, d]."""
    d = x.shape[-1]
    half = d // 2
    inv = 1.0 / theta ** (np.arange(0, half, 2) / half)             # [half/2]
    out = np.empty_like(x)
    for axis in range(2):
        part = x[..., axis * half:(axis + 1) * half]
        ang = positions[:, axis][:, None] * inv[None, :]              # [N, half/2]
        cos = np.cos(np.concatenate([ang, ang], -1))[:, None, :]
        sin = np.sin(np.concatenate([ang, ang], -1))[:, None, :]
        rot = np.concatenate([-part[..., half // 2:], part[..., :half // 2]], -1)
        out[..., axis * half:(axis + 1) * half] = part * cos + rot * sin
    return out


def vision_forward(f, patches, positions, dump):
    W = Weights(f)
    E = int(f.get("clip.vision.embedding_length"))
    n_layer = int(f.get("clip.vision.block_count"))
    heads = int(f.get("clip.vision.attention.head_count"))
    eps = float(f.get("clip.vision.attention.layer_norm_epsilon", 1e-6))
    p = int(f.get("clip.vision.patch_size"))
    hd = W("v.blk.0.attn_q_norm.weight").shape[0]
    n = patches.shape[0]

    # Patch embedding: the converter stored input_proj [E, p*p*3] as a conv kernel [E, 3, p, p];
    # undo that to the reference's (row, column, channel) column order.
    conv = W("v.patch_embd.weight")                                  # [E, 3, p, p]
    w_in = conv.transpose(0, 2, 3, 1).reshape(E, p * p * 3)
    x = (2.0 * (patches - 0.5)) @ w_in.T
    table = W("v.position_embd.weight")                              # [2, pos, E]
    x = x + table[0][positions[:, 0]] + table[1][positions[:, 1]]
    dump["patch_embd"] = x

    for il in range(n_layer):
        b = f"v.blk.{il}"
        h = rmsnorm(x, W(f"{b}.ln1.weight"), eps)
        q = W.linear(f"{b}.attn_q", h).reshape(n, heads, hd)
        k = W.linear(f"{b}.attn_k", h).reshape(n, -1, hd)
        v = W.linear(f"{b}.attn_v", h).reshape(n, -1, hd)
        q = rope_2d(rmsnorm(q, W(f"{b}.attn_q_norm.weight"), eps), positions, VISION_ROPE_THETA)
        k = rope_2d(rmsnorm(k, W(f"{b}.attn_k_norm.weight"), eps), positions, VISION_ROPE_THETA)
        v = rmsnorm(v, None, eps)
        group = heads // k.shape[1]
        o = np.empty((n, heads, hd))
        for i in range(heads):                                       # bidirectional, scale 1
            s = q[:, i, :] @ k[:, i // group, :].T
            o[:, i, :] = softmax(s) @ v[:, i // group, :]
        o = W.linear(f"{b}.attn_out", o.reshape(n, heads * hd))
        x = x + rmsnorm(o, W(f"{b}.attn_post_norm.weight"), eps)
        h = rmsnorm(x, W(f"{b}.ln2.weight"), eps)
        m = W.linear(f"{b}.ffn_down", gelu_tanh(W.linear(f"{b}.ffn_gate", h)) * W.linear(f"{b}.ffn_up", h))
        x = x + rmsnorm(m, W(f"{b}.ffn_post_norm.weight"), eps)
        if W.has(f"{b}.out_scale.weight"):
            x = x * W(f"{b}.out_scale.weight")
        dump[f"blk.{il}.out"] = x

    # Gemma4VisionPooler: average each k x k block of patches, by position, then * sqrt(E).
    k = POOLING_KERNEL
    max_x = positions[:, 0].max() + 1
    idx = (positions[:, 0] // k) + (max_x // k) * (positions[:, 1] // k)
    n_out = n // (k * k)
    pooled = np.zeros((n_out, E))
    np.add.at(pooled, idx, x / (k * k))
    pooled = pooled * math.sqrt(E)
    if W.has("v.std_bias") and W.has("v.std_scale"):
        pooled = (pooled - W("v.std_bias")) * W("v.std_scale")
    dump["pooled"] = pooled
    projected = rmsnorm(pooled, None, eps) @ W("mm.input_projection.weight").T
    dump["projected"] = projected
    return projected


# ----------------------------------------------------------------------------------------------
# Audio features (feature_extraction_gemma4.py, audio_utils.mel_filter_bank)

def read_wav(path):
    """PCM WAV → float64 mono samples in [-1, 1) and the sample rate (channels averaged)."""
    with wave.open(path, "rb") as w:
        n_ch, width, rate, n = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
        raw = w.readframes(n)
    if width == 1:
        x = (np.frombuffer(raw, np.uint8).astype(np.float64) - 128.0) / 128.0
    elif width == 2:
        x = np.frombuffer(raw, "<i2").astype(np.float64) / 32768.0
    elif width == 4:
        x = np.frombuffer(raw, "<i4").astype(np.float64) / 2147483648.0
    else:
        raise ValueError(f"{width}-byte samples: not handled by the reference")
    return x.reshape(-1, n_ch).mean(axis=1), rate


def mel_filters(n_freq, n_mel, f_min, f_max, rate):
    """HTK mel filter bank without normalisation: [n_freq, n_mel] triangles."""
    hz_to_mel = lambda f: 2595.0 * np.log10(1.0 + f / 700.0)            # noqa: E731
    mel_to_hz = lambda m: 700.0 * (10.0 ** (m / 2595.0) - 1.0)          # noqa: E731
    mel = np.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mel + 2)
    edges = mel_to_hz(mel)
    fft_freqs = np.linspace(0, rate // 2, n_freq)
    diff = np.diff(edges)
    slopes = edges[None, :] - fft_freqs[:, None]
    down = -slopes[:, :-2] / diff[:-1]
    up = slopes[:, 2:] / diff[1:]
    return np.maximum(0.0, np.minimum(down, up))


def log_mel(samples):
    """→ (mel [frames, 128], valid [frames] bool), as the feature extractor for one clip:
    truncate to 30 s, pad to a multiple of 128 samples, semicausal padding, 20 ms periodic Hann
    frames every 10 ms, |rfft(512)|, HTK mel, log(x + 1e-3), padded frames zeroed."""
    frame = int(round(SAMPLE_RATE * FRAME_MS / 1000.0))
    hop = int(round(SAMPLE_RATE * HOP_MS / 1000.0))
    n_fft = 2 ** math.ceil(math.log2(frame))
    x = np.asarray(samples, dtype=np.float32)[:MAX_SAMPLES]
    n_real = len(x)
    n_pad = -(-n_real // PAD_MULTIPLE) * PAD_MULTIPLE
    x = np.pad(x, (frame // 2, n_pad - n_real))
    real = np.concatenate([np.zeros(frame // 2), np.ones(n_real), np.zeros(n_pad - n_real)])
    n_frames = (len(x) - (frame + 1)) // hop + 1
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(frame) / frame)).astype(np.float32)
    starts = np.arange(n_frames) * hop
    frames = np.stack([x[s:s + frame] for s in starts]) * window       # float32, as the reference
    spectrum = np.abs(np.fft.rfft(frames.astype(np.float64), n=n_fft, axis=-1))
    mel = np.log(spectrum @ mel_filters(n_fft // 2 + 1, N_MEL, 0.0, SAMPLE_RATE / 2, SAMPLE_RATE) + MEL_FLOOR)
    valid = real[starts + frame] > 0
    return mel * valid[:, None], valid


# ----------------------------------------------------------------------------------------------
# Audio encoder (Gemma4AudioModel + Gemma4MultimodalEmbedder)

def conv2d_s2(x, w):
    """Conv2d kernel 3, stride 2, padding 1, no bias. x [C_in, T, F], w [C_out, C_in, 3, 3]."""
    c_in, t, f = x.shape
    t_out, f_out = (t - 1) // 2 + 1, (f - 1) // 2 + 1
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    out = np.zeros((w.shape[0], t_out, f_out))
    for dt in range(3):
        for df in range(3):
            patch = xp[:, dt:dt + 2 * t_out:2, df:df + 2 * f_out:2]       # [C_in, t_out, f_out]
            out += np.einsum("oc,ctf->otf", w[:, :, dt, df], patch)
    return out


def subsample(W, mel, valid, eps):
    """Gemma4AudioSubSampleConvProjection: two (conv, LayerNorm over channels, ReLU) layers with
    the padded frames zeroed before each, then the frequency x channel features projected."""
    h = mel[None, :, :]                                                 # [1, T, F]
    mask = valid
    for layer in range(2):
        h = h * mask[None, :, None]
        h = conv2d_s2(h, W(f"a.conv1d.{layer}.weight"))
        h = layernorm(h.transpose(1, 2, 0), W(f"a.conv1d.{layer}.norm.weight"), eps).transpose(2, 0, 1)
        h = np.maximum(h, 0.0)
        mask = mask[::2]
    c, t, f = h.shape
    feats = h.transpose(1, 2, 0).reshape(t, f * c)                    # (frequency, channel) order
    return feats @ W("a.input_projection.weight").T, mask


def rel_position_embeddings(hidden):
    """Gemma4AudioRelPositionalEncoding: [sin | cos] of positions context//2 .. 0."""
    context = AUDIO_CHUNK + AUDIO_CONTEXT_LEFT - 1 + AUDIO_CONTEXT_RIGHT
    n_ts = hidden // 2
    inc = math.log(10000.0) / max(n_ts - 1, 1)
    inv = np.exp(np.arange(n_ts) * -inc)
    pos = np.arange(context // 2, -1, -1)[:, None] * inv[None, :]
    return np.concatenate([np.sin(pos), np.cos(pos)], axis=-1)


def audio_attention(W, b, h, heads, valid):
    """Gemma4AudioAttention: chunked local attention with relative positions, in blocks."""
    T, H = h.shape
    d = H // heads
    C = AUDIO_CHUNK
    P = AUDIO_CONTEXT_LEFT - 1
    F = AUDIO_CONTEXT_RIGHT
    S = C + P + F
    q = W.linear(f"{b}.attn_q", h).reshape(T, heads, d)
    k = W.linear(f"{b}.attn_k", h).reshape(T, heads, d)
    v = W.linear(f"{b}.attn_v", h).reshape(T, heads, d)
    q = q * (d ** -0.5 / math.log(2)) * W(f"{b}.per_dim_scale.weight")   # stored softplus'd
    k = k * (math.log(1 + math.e) / math.log(2))
    nb = -(-T // C)
    qb = np.pad(q, ((0, nb * C - T), (0, 0), (0, 0))).reshape(nb, C, heads, d)
    def context(t):
        tp = np.pad(t, ((P, F + C - 1), (0, 0), (0, 0)))
        return np.stack([tp[i * C:i * C + S] for i in range(nb)])      # [nb, S, heads, d]
    kb, vb = context(k), context(v)
    rel = rel_position_embeddings(H) @ W(f"{b}.attn_k_rel.weight").T   # [R, H]
    rel = rel.reshape(-1, heads, d)
    R = rel.shape[0]
    ac = np.einsum("bchd,bshd->bhcs", qb, kb)                          # [nb, heads, C, S]
    bd = np.einsum("bchd,rhd->bhcr", qb, rel)                          # [nb, heads, C, R]
    # _rel_shift: pad to S+1, flatten, keep C*S, view [C, S].
    bd = np.pad(bd, ((0, 0), (0, 0), (0, 0), (0, S + 1 - R)))
    bd = bd.reshape(nb, heads, C * (S + 1))[..., :C * S].reshape(nb, heads, C, S)
    scores = np.tanh((ac + bd) / AUDIO_LOGIT_CAP) * AUDIO_LOGIT_CAP
    # Mask: valid keys, within the left window (0 <= q - k < context_left - 1), blocked.
    qpos = (np.arange(nb)[:, None] * C + np.arange(C)[None, :])[:, :, None]     # [nb, C, 1]
    kpos = (np.arange(nb)[:, None] * C - P + np.arange(S)[None, :])[:, None, :]  # [nb, 1, S]
    dist = qpos - kpos
    kvalid = np.zeros(nb * C + S, dtype=bool)
    kvalid[:T] = valid[:T]
    ok = (dist >= 0) & (dist < AUDIO_CONTEXT_LEFT - 1) & (kpos >= 0) & (kpos < T)
    ok &= np.take(kvalid, np.clip(kpos, 0, None)) & (qpos < T)
    scores = np.where(ok[:, None, :, :], scores, AUDIO_INVALID_LOGIT)
    o = np.einsum("bhcs,bshd->bchd", softmax(scores), vb).reshape(nb * C, H)[:T]
    return W.linear(f"{b}.attn_out", o)


def feed_forward(W, b, x, suffix, eps):
    h = rmsnorm(x, W(f"{b}.ffn_norm{suffix}.weight"), eps)
    h = W.linear(f"{b}.ffn_down{suffix}", silu(W.linear(f"{b}.ffn_up{suffix}", h)))
    return x + AUDIO_RESIDUAL_WEIGHT * rmsnorm(h, W(f"{b}.ffn_post_norm{suffix}.weight"), eps)


def light_conv(W, b, x, eps):
    """Gemma4AudioLightConv1d: norm, linear to 2H, GLU, causal depthwise conv, norm, SiLU,
    linear, residual. conv_norm holds the pre-norm, norm_conv the post-conv norm (converter)."""
    h = rmsnorm(x, W(f"{b}.conv_norm.weight"), eps)
    h = W.linear(f"{b}.conv_pw1", h)
    H = x.shape[1]
    h = h[:, :H] * sigmoid(h[:, H:])
    kern = W(f"{b}.conv_dw.weight")                                    # [H, K]
    K = kern.shape[1]
    hp = np.pad(h, ((K - 1, 0), (0, 0)))
    h = sum(hp[j:j + len(x)] * kern[:, j] for j in range(K))
    h = silu(rmsnorm(h, W(f"{b}.norm_conv.weight"), eps))
    return x + W.linear(f"{b}.conv_pw2", h)


def audio_forward(f, mel, valid, dump):
    W = Weights(f)
    H = int(f.get("clip.audio.embedding_length"))
    n_layer = int(f.get("clip.audio.block_count"))
    heads = int(f.get("clip.audio.attention.head_count"))
    eps = AUDIO_EPS  # the reference's rms_norm_eps; llama.cpp notes the GGUF value may be wrong
    x, mask = subsample(W, mel, valid, eps)
    dump["subsampled"] = x
    for il in range(n_layer):
        b = f"a.blk.{il}"
        x = feed_forward(W, b, x, "", eps)
        h = rmsnorm(x, W(f"{b}.attn_pre_norm.weight"), eps)
        h = audio_attention(W, b, h, heads, mask)
        x = x + rmsnorm(h, W(f"{b}.attn_post_norm.weight"), eps)
        x = light_conv(W, b, x, eps)
        x = feed_forward(W, b, x, "_1", eps)
        x = rmsnorm(x, W(f"{b}.ln2.weight"), eps)
        dump[f"blk.{il}.out"] = x[mask]
    x = x @ W("a.pre_encode.out.weight").T + W("a.pre_encode.out.bias")
    x = x[mask]                                                         # padding tokens dropped
    dump["encoded"] = x
    projected = rmsnorm(x, None, eps) @ W("mm.a.input_projection.weight").T
    dump["projected"] = projected
    return projected


# ----------------------------------------------------------------------------------------------

def write_dump(dump, path, exact_f16=()):
    """Names in exact_f16 hold small integers (8-bit pixels), stored as f16 to halve the file."""
    w = GgufWriter()
    for name, value in dump.items():
        a = np.asarray(value, dtype=np.float64)
        w.tensor(name, a.reshape(a.shape[0], -1) if a.ndim > 1 else a, "f16" if name in exact_f16 else "f32")
    w.write(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["image", "audio", "preprocess"])
    ap.add_argument("inputs", nargs="+", help="MMPROJ INPUT (image, audio) or IMAGE... (preprocess)")
    ap.add_argument("--image-tokens", type=int, default=280, choices=SUPPORTED_SOFT_TOKENS)
    ap.add_argument("--budgets", default="70,280", help="preprocess: comma-separated token budgets")
    ap.add_argument("--patch-size", type=int, default=16, help="preprocess: pixels per patch side")
    ap.add_argument("--samples", type=int, help="audio: keep only the first N samples of the clip")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    dump = {}
    if args.kind == "preprocess":
        for i, path in enumerate(args.inputs):
            name = os.path.basename(path)
            rgb = load_rgb(path)
            dump[f"{name}.rgb"] = rgb.reshape(rgb.shape[0], -1)
            for budget in (int(b) for b in args.budgets.split(",")):
                resized, patches, _ = preprocess_image(path, args.patch_size, budget)
                dump[f"{name}.{budget}.pixels"] = resized.reshape(resized.shape[0], -1)
                if i == 0:  # patching is the same for every image: checked on the first
                    dump[f"{name}.{budget}.patches"] = patches
        write_dump(dump, args.output, exact_f16=[k for k in dump if k.endswith((".rgb", ".pixels"))])
        return
    if len(args.inputs) != 2:
        ap.error(f"{args.kind} takes MMPROJ and one input")
    f = GgufFile(args.inputs[0])
    if args.kind == "image":
        rgb, patches, positions = preprocess_image(args.inputs[1], int(f.get("clip.vision.patch_size")),
                                                   args.image_tokens)
        dump["pixels"] = rgb.reshape(rgb.shape[0], -1)
        dump["patches"] = patches
        dump["positions"] = positions
        vision_forward(f, patches, positions, dump)
    else:
        samples, rate = read_wav(args.inputs[1])
        if args.samples:
            samples = samples[:args.samples]
        if rate != SAMPLE_RATE:
            raise ValueError(f"the reference takes {SAMPLE_RATE} Hz audio, not {rate}")
        mel, valid = log_mel(samples)
        dump["samples"] = samples
        dump["mel"] = mel
        dump["mel_valid"] = valid.astype(np.float64)
        audio_forward(f, mel, valid, dump)
    write_dump(dump, args.output)


if __name__ == "__main__":
    main()
