#!/usr/bin/python3
"""Writes a Hugging Face PEFT LoRA adapter directory for a checkpoint written by
write_hf_checkpoint.py: adapter_config.json (r, lora_alpha, target_modules) and
adapter_model.safetensors with random lora_A [r, in] and lora_B [out, r] for every targeted
module of every layer, under PEFT's names (base_model.model.<module>.lora_A.weight).

    write_peft_adapter.py CHECKPOINT_DIR -o ADAPTER_DIR [--rank 4] [--alpha 8] [--seed 1]
        [--targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj] [--dora]
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_checkpoint, write_file  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--targets", default="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
    ap.add_argument("--dora", action="store_true", help="add DoRA magnitudes (a bad-input case)")
    args = ap.parse_args()
    weights = read_checkpoint(args.checkpoint)
    targets = args.targets.split(",")
    rng = np.random.default_rng(args.seed)
    tensors = {}
    for name in sorted(weights):
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        if not module or ".layers." not in module or module.rsplit(".", 1)[-1] not in targets:
            continue
        n_out, n_in = weights[name].shape
        peft = "base_model.model." + module
        tensors[peft + ".lora_A.weight"] = rng.normal(0.0, 0.05, size=(args.rank, n_in)).astype(np.float32)
        tensors[peft + ".lora_B.weight"] = rng.normal(0.0, 0.05, size=(n_out, args.rank)).astype(np.float32)
        if args.dora:
            tensors[peft + ".lora_magnitude_vector"] = np.ones(n_out, dtype=np.float32)
    os.makedirs(args.output, exist_ok=True)
    write_file(os.path.join(args.output, "adapter_model.safetensors"), tensors, lambda _: "F32")
    config = {"peft_type": "LORA", "r": args.rank, "lora_alpha": args.alpha,
              "target_modules": targets, "use_dora": args.dora, "use_rslora": False,
              "base_model_name_or_path": os.path.basename(os.path.normpath(args.checkpoint))}
    with open(os.path.join(args.output, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=1)


if __name__ == "__main__":
    main()
