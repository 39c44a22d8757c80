#!/usr/bin/env python3
"""Prints the Kubernetes `resources:` block for a headroom replica from its memory plan.

Usage: deploy/plan-resources.py [HEADROOM_BINARY] -- PLAN_FLAGS...
  e.g. deploy/plan-resources.py -- --shape gemma4-e2b --quant q4_k_m --ctx 8192 --slots 8 --assume-gpu 24G@900
       deploy/plan-resources.py build/apps/headroom/headroom -- -m model.gguf --ctx 8192 --slots 8

Runs `headroom plan --json` with the flags `serve` will get and sizes the container from it:
memory = the bytes the plan puts in host memory + what the server adds beyond the plan (threads,
connections, buffers: 256 MiB) + 10 %; one GPU when the plan uses one (Kubernetes cannot request
GPU memory: the comment says how much the GPU must have free); CPU = the threads planned for."""
import json
import math
import re
import subprocess
import sys

SERVER_OVERHEAD = 256 << 20

args = sys.argv[1:]
binary = "headroom"
if args and args[0] != "--":
    binary, args = args[0], args[1:]
if args and args[0] == "--":
    args = args[1:]
plan = json.loads(subprocess.run([binary, "plan", "--json", *args], check=True, capture_output=True, text=True).stdout)
if not plan["fits"]:
    sys.exit("the plan does not fit: " + "; ".join(plan.get("problems", [])))

host = sum(d["planned_bytes"] for d in plan["devices"] if d["kind"] == "cpu")
gpus = [d for d in plan["devices"] if d["kind"] == "gpu" and d["planned_bytes"] > 0]
memory_mib = math.ceil((host + SERVER_OVERHEAD) * 1.10 / (1 << 20))
threads = 1
for d in plan["devices"]:
    m = re.search(r"(\d+) threads", d["name"])
    if d["kind"] == "cpu" and m:
        threads = int(m.group(1))

request = plan["request"]
print(f"# headroom plan {' '.join(args)}: ctx {request['ctx']}, {request['slots']} slots, "
      f"{host / (1 << 30):.2f} GiB in host memory"
      + "".join(f"; {d['planned_bytes'] / (1 << 30):.2f} GiB on the GPU (it needs that much free)" for d in gpus))
print("resources:")
print("  requests:")
print(f"    cpu: \"{threads}\"")
print(f"    memory: {memory_mib}Mi")
print("  limits:")
print(f"    memory: {memory_mib}Mi")
if gpus:
    print(f"    nvidia.com/gpu: {len(gpus)}")
