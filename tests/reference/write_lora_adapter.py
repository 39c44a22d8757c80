#!/usr/bin/python3
"""Writes a LoRA adapter for a base GGUF model in the form llama.cpp's convert_lora_to_gguf.py
writes: general.type "adapter", adapter.type "lora", adapter.lora.alpha, and for each adapted
matrix W {n_in, n_out} of the base a pair W.lora_a {n_in, rank} and W.lora_b {rank, n_out}
(numpy [rank, n_in] and [n_out, rank]), with random values, for test fixtures.

    write_lora_adapter.py BASE.gguf -o ADAPTER.gguf [--rank 4] [--alpha 8] [--seed 1]
        [--targets q,k,v,o,gate,up,down] [--type f32|f16|q8_0] [--arch NAME]

Every layer's targets that the base file has are adapted (a KV-shared layer's k and v only when
the file carries those tensors). --arch writes another architecture's name (a bad-input case).
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_reader import GgufFile  # noqa: E402
from gguf_writer import GgufWriter  # noqa: E402

TARGETS = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
           "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--targets", default="q,k,v,o,gate,up,down")
    ap.add_argument("--type", default="f32", choices=["f32", "f16", "q8_0"])
    ap.add_argument("--arch")
    args = ap.parse_args()
    base = GgufFile(args.base)
    rng = np.random.default_rng(args.seed)
    n_layer = int(base.get(f"{base.get('general.architecture')}.block_count"))
    w = GgufWriter()
    w.add("general.architecture", args.arch or base.get("general.architecture"))
    w.add("general.type", "adapter")
    w.add("general.name", os.path.splitext(os.path.basename(args.output))[0])
    w.add("adapter.type", "lora")
    w.add("adapter.lora.alpha", float(args.alpha), kind="f32")
    for il in range(n_layer):
        for t in args.targets.split(","):
            name = f"blk.{il}.{TARGETS[t]}.weight"
            if not base.has(name):
                continue
            n_in, n_out = base.tensors[name].shape[:2]          # ggml {n_in, n_out}
            # Sized so the merged update is a fifth or so of the base weights (std 0.05):
            # large enough to move every logit, small enough to keep the model stable.
            a = rng.normal(0.0, 0.05, size=(args.rank, n_in)).astype(np.float32)
            b = rng.normal(0.0, 0.05, size=(n_out, args.rank)).astype(np.float32)
            w.tensor(name + ".lora_a", a, args.type)
            w.tensor(name + ".lora_b", b, args.type if args.rank % 32 == 0 else "f32")
    w.write(args.output)


if __name__ == "__main__":
    main()
