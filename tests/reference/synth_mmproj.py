#!/usr/bin/python3
"""Random-weight Gemma 4 projector ("mmproj") GGUF files, laid out as llama.cpp's converter
writes them (its Gemma4VisionAudioModel class): architecture "clip", the clip.vision.* and
clip.audio.* keys, projector types gemma4v / gemma4a, tensors v.* (vision tower), a.* (audio
conformer), mm.* and mm.a.* (the embedders into the text model).

    synth_mmproj.py --shape tiny -o mmproj.gguf [--text-embd 128] [--type f32|f16|q8_0]
                    [--no-audio] [--no-vision] [--clamp] [--seed N] [--no-weights]

Shapes: tiny (tests: small widths, but the real patch size, pooling, mel bins and conformer
constants, so the real preprocessing runs), e2b (768-wide 16-layer ViT + 12-layer 1024-wide
conformer, as Gemma 4 E2B/E4B), 31b (1152-wide 27-layer ViT, no audio, as 31B/26B-A4B).

Numpy order is PyTorch's [out, in] (ggml {in, out}). What the converter changes, reproduced:
the patch embedding becomes a conv kernel [n_embd, 3, p, p] (channel-major columns); the audio
per-dim query scale is stored after softplus; the depthwise conv kernel is [n_embd, K]; the
lconv1d pre-norm is stored as conv_norm and its post-conv norm as norm_conv (tensor_mapping.py
swaps them); scalar clamp bounds of clippable linears become [1] tensors.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_writer import GgufWriter  # noqa: E402

SHAPES = {
    # vision: embd, heads, ff, layers, patch, pos table; audio: hidden, heads, layers, conv
    # channels, output_proj_dims, depthwise kernel. None: no such encoder.
    "tiny": dict(text_embd=128,
                 vision=dict(embd=48, heads=3, ff=96, layers=2, patch=16, pos=64),
                 audio=dict(hidden=64, heads=4, layers=2, channels=(128, 4), out=96, kernel=5)),
    "e2b": dict(text_embd=1536,
                vision=dict(embd=768, heads=12, ff=3072, layers=16, patch=16, pos=10240),
                audio=dict(hidden=1024, heads=8, layers=12, channels=(128, 32), out=1536, kernel=5)),
    "31b": dict(text_embd=5376,
                vision=dict(embd=1152, heads=16, ff=4304, layers=27, patch=16, pos=10240),
                audio=None),
}
N_MEL = 128          # Gemma4AudioFeatureExtractor feature_size
LINEAR_CLAMPS = ("input_min", "input_max", "output_min", "output_max")


class SparseWriter(GgufWriter):
    """Writes the tensor table only (data left unwritten): a real-shaped file for plans."""

    def tensor(self, name, array, type_name="f32"):
        self.empty_tensor(name, np.shape(array), type_name)


class ShapeOnly:
    """Stands in for numpy's generator when no values are wanted: arrays of the right shape, no
    data drawn (np.broadcast_to allocates nothing)."""

    def normal(self, loc=0.0, scale=1.0, size=None):
        return np.broadcast_to(np.float64(loc), size)

    def uniform(self, low=0.0, high=1.0, size=None):
        return low if size is None else np.broadcast_to(np.float64(low), size)


class Synth:
    def __init__(self, seed, wtype, clamp, sparse=False):
        self.rng = ShapeOnly() if sparse else np.random.default_rng(seed)
        self.wtype = wtype
        self.clamp = clamp
        self.w = SparseWriter() if sparse else GgufWriter()

    def matrix(self, name, n_out, n_in, std=None, clippable=False):
        std = std if std is not None else 1.0 / np.sqrt(n_in)
        m = self.rng.normal(0.0, std, size=(n_out, n_in))
        t = self.wtype if (self.wtype != "q8_0" or n_in % 32 == 0) else "f16"
        self.w.tensor(name + ".weight", m, t)
        if clippable and self.clamp:
            # Bounds that bite on the tails of typical activations (inputs ~N(0,1) after norms).
            lo_in, hi_in = -self.rng.uniform(1.5, 2.5), self.rng.uniform(1.5, 2.5)
            lo_out, hi_out = -self.rng.uniform(1.0, 2.0), self.rng.uniform(1.0, 2.0)
            base = name
            for suffix, v in zip(LINEAR_CLAMPS, (lo_in, hi_in, lo_out, hi_out)):
                self.w.tensor(f"{base}.{suffix}", np.array([v]), "f32")

    def norm(self, name, n, around=1.0, spread=0.1):
        self.w.tensor(name, around + self.rng.normal(0.0, spread, size=n), "f32")

    def vector(self, name, values):
        self.w.tensor(name, values, "f32")


def write_vision(s, v, text_embd):
    w = s.w
    E, heads, ff, p = v["embd"], v["heads"], v["ff"], v["patch"]
    hd = E // heads
    w.add("clip.has_vision_encoder", True)
    w.add("clip.vision.projector_type", "gemma4v")
    w.add("clip.vision.projection_dim", text_embd, kind="u32")
    w.add("clip.vision.image_size", 224, kind="u32")
    w.add("clip.vision.patch_size", p, kind="u32")
    w.add("clip.vision.embedding_length", E, kind="u32")
    w.add("clip.vision.feed_forward_length", ff, kind="u32")
    w.add("clip.vision.block_count", v["layers"], kind="u32")
    w.add("clip.vision.attention.head_count", heads, kind="u32")
    w.add("clip.vision.attention.layer_norm_epsilon", 1e-6, kind="f32")
    w.add("clip.vision.image_mean", [0.0, 0.0, 0.0], kind="array:f32")
    w.add("clip.vision.image_std", [1.0, 1.0, 1.0], kind="array:f32")
    # Patch embedding as the converter stores it: a conv kernel [E, 3, p, p] (f16/f32 only).
    patch = s.rng.normal(0.0, 1.0 / np.sqrt(3 * p * p), size=(E, 3, p, p))
    w.tensor("v.patch_embd.weight", patch, "f32" if s.wtype == "f32" else "f16")
    # Two learned position tables (x, then y), forced to f32 by the converter.
    w.tensor("v.position_embd.weight", s.rng.normal(0.0, 0.5, size=(2, v["pos"], E)), "f32")
    for il in range(v["layers"]):
        b = f"v.blk.{il}"
        s.norm(f"{b}.ln1.weight", E)
        s.matrix(f"{b}.attn_q", heads * hd, E, clippable=True)
        s.matrix(f"{b}.attn_k", heads * hd, E, clippable=True)
        s.matrix(f"{b}.attn_v", heads * hd, E, clippable=True)
        s.norm(f"{b}.attn_q_norm.weight", hd)
        s.norm(f"{b}.attn_k_norm.weight", hd, around=0.5)
        s.matrix(f"{b}.attn_out", E, heads * hd, clippable=True)
        s.norm(f"{b}.attn_post_norm.weight", E)
        s.norm(f"{b}.ln2.weight", E)
        s.matrix(f"{b}.ffn_gate", ff, E, clippable=True)
        s.matrix(f"{b}.ffn_up", ff, E, clippable=True)
        s.matrix(f"{b}.ffn_down", E, ff, clippable=True)
        s.norm(f"{b}.ffn_post_norm.weight", E)
    s.vector("v.std_bias", s.rng.normal(0.0, 0.2, size=E))
    s.norm("v.std_scale", E, around=1.0, spread=0.2)
    s.matrix("mm.input_projection", text_embd, E)


def write_audio(s, a, text_embd):
    w = s.w
    H, heads, (c0, c1), K = a["hidden"], a["heads"], a["channels"], a["kernel"]
    hd = H // heads
    f2 = ((N_MEL + 1) // 2 + 1) // 2  # mel bins after two stride-2 convs (kernel 3, padding 1)
    w.add("clip.has_audio_encoder", True)
    w.add("clip.audio.projector_type", "gemma4a")
    w.add("clip.audio.projection_dim", text_embd, kind="u32")
    w.add("clip.audio.embedding_length", H, kind="u32")
    w.add("clip.audio.feed_forward_length", 4 * H, kind="u32")
    w.add("clip.audio.block_count", a["layers"], kind="u32")
    w.add("clip.audio.attention.head_count", heads, kind="u32")
    w.add("clip.audio.num_mel_bins", N_MEL, kind="u32")
    w.add("clip.audio.attention.layer_norm_epsilon", 1e-6, kind="f32")
    # Sub-sampling convolutions [out, in, 3, 3] (f32, forced by the converter), each followed by a
    # LayerNorm over channels (weight only).
    w.tensor("a.conv1d.0.weight", s.rng.normal(0.0, 1.0 / 3.0, size=(c0, 1, 3, 3)), "f32")
    s.norm("a.conv1d.0.norm.weight", c0)
    w.tensor("a.conv1d.1.weight", s.rng.normal(0.0, 1.0 / np.sqrt(9 * c0), size=(c1, c0, 3, 3)), "f32")
    s.norm("a.conv1d.1.norm.weight", c1)
    s.matrix("a.input_projection", H, f2 * c1)
    for il in range(a["layers"]):
        b = f"a.blk.{il}"
        for suffix in ("", "_1"):  # the two half-step feed-forward modules
            s.norm(f"{b}.ffn_norm{suffix}.weight", H)
            s.matrix(f"{b}.ffn_up{suffix}", 4 * H, H, clippable=True)
            s.matrix(f"{b}.ffn_down{suffix}", H, 4 * H, clippable=True)
            s.norm(f"{b}.ffn_post_norm{suffix}.weight", H)
        s.norm(f"{b}.attn_pre_norm.weight", H)
        s.matrix(f"{b}.attn_q", H, H, clippable=True)
        s.matrix(f"{b}.attn_k", H, H, clippable=True)
        s.matrix(f"{b}.attn_v", H, H, clippable=True)
        s.matrix(f"{b}.attn_out", H, H, clippable=True)
        s.matrix(f"{b}.attn_k_rel", H, H)
        # Stored after softplus, as the converter does; values around softplus(0) = 0.69.
        s.vector(f"{b}.per_dim_scale.weight", np.log1p(np.exp(s.rng.normal(0.0, 0.5, size=hd))))
        s.norm(f"{b}.attn_post_norm.weight", H)
        s.norm(f"{b}.conv_norm.weight", H)  # lconv1d.pre_layer_norm
        s.matrix(f"{b}.conv_pw1", 2 * H, H, clippable=True)
        w.tensor(f"{b}.conv_dw.weight", s.rng.normal(0.0, 1.0 / np.sqrt(K), size=(H, K)), "f32")
        s.norm(f"{b}.norm_conv.weight", H)  # lconv1d.conv_norm
        s.matrix(f"{b}.conv_pw2", H, H, clippable=True)
        s.norm(f"{b}.ln2.weight", H)
    s.matrix("a.pre_encode.out", a["out"], H)
    s.vector("a.pre_encode.out.bias", s.rng.normal(0.0, 0.1, size=a["out"]))
    s.matrix("mm.a.input_projection", text_embd, a["out"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    ap.add_argument("--text-embd", type=int, help="the text model's n_embd (default: the shape's)")
    ap.add_argument("--type", default="f32", choices=["f32", "f16", "q8_0"], help="matrix type")
    ap.add_argument("--no-audio", action="store_true")
    ap.add_argument("--no-vision", action="store_true")
    ap.add_argument("--clamp", action="store_true", help="clip bounds on the clippable linears")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-weights", action="store_true",
                    help="leave tensor data unwritten (a sparse file: the tensor table, for plans)")
    args = ap.parse_args()

    shape = SHAPES[args.shape]
    text_embd = args.text_embd or shape["text_embd"]
    s = Synth(args.seed, args.type, args.clamp, sparse=args.no_weights)
    s.w.add("general.architecture", "clip")
    s.w.add("general.type", "mmproj")
    s.w.add("general.name", f"gemma4-{args.shape}-mmproj")
    s.w.add("general.file_type", {"f32": 0, "f16": 1, "q8_0": 7}[args.type], kind="u32")
    s.w.add("general.alignment", 32, kind="u32")
    if shape["vision"] and not args.no_vision:
        write_vision(s, shape["vision"], text_embd)
    if shape["audio"] and not args.no_audio:
        write_audio(s, shape["audio"], text_embd)
    s.w.write(args.output)


if __name__ == "__main__":
    main()
