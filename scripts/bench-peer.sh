#!/usr/bin/env bash
# headroom bench against its own scalar reference backend and, if given, llama.cpp's llama-bench,
# on the same GGUF files in the same run; prints a markdown table of tok/s and ratios.
#
# Usage: scripts/bench-peer.sh [-t THREADS] [-p N_PROMPT] [-n N_GEN] [-r REPS] MODEL.gguf... [-- LLAMA_BENCH]
#   Models: e.g. `headroom synth --shape e2b --type q4_k_m --no-weights -o e2b.gguf` (a sparse file
#   whose weights read as zeros: the same bytes and arithmetic as random weights, written in
#   milliseconds), `headroom synth --arch llama --shape 25m --type q8_0 -o llama25m.gguf`.
#   LLAMA_BENCH: path to a llama-bench binary built elsewhere (this script never builds it).
# The scalar baseline runs with smaller -p/-n on models over 1 GiB (it is ~50× slower).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=2 n_prompt=128 n_gen=32 reps=3
models=() llama_bench=""
while [ $# -gt 0 ]; do
  case "$1" in
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --) llama_bench=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
    *) models+=("$1"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || { echo "usage: $0 [-t T] [-p N] [-n N] [-r R] MODEL.gguf... [-- LLAMA_BENCH]" >&2; exit 2; }
headroom=build/apps/headroom/headroom
[ -x "$headroom" ] || { echo "build headroom first (scripts/build.sh)" >&2; exit 2; }
if [ -n "$llama_bench" ] && [ ! -x "$llama_bench" ]; then
  echo "no llama-bench at $llama_bench: comparing with the scalar baseline only" >&2
  llama_bench=""
fi
out=$(mktemp -d)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores; threads $threads; $(date -u +%F)"
for m in "${models[@]}"; do
  name=$(basename "$m")
  "$headroom" bench -m "$m" -t "$threads" -p "$n_prompt" -n "$n_gen" -r "$reps" --json 2>/dev/null > "$out/$name.cpu.json"
  size=$(stat -c %s "$m")
  if [ "$size" -gt $((1 << 30)) ]; then rp=16 rn=4 rr=1; else rp=$n_prompt rn=$n_gen rr=$reps; fi
  "$headroom" bench -m "$m" -t "$threads" -p "$rp" -n "$rn" -r "$rr" --backend ref --json 2>/dev/null > "$out/$name.ref.json"
  if [ -n "$llama_bench" ]; then
    "$llama_bench" -m "$m" -t "$threads" -p "$n_prompt" -n "$n_gen" -r "$reps" -o json 2>/dev/null > "$out/$name.llama.json" ||
      echo "llama-bench could not run $name" >&2
  fi
done
/usr/bin/python3 - "$out" "${models[@]}" <<'PY'
import json, os, sys
out, models = sys.argv[1], sys.argv[2:]
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
print("\n| model | test | headroom tok/s | scalar ref tok/s | headroom / ref | llama.cpp tok/s | headroom / llama.cpp | tg roofline share |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for m in models:
    name = os.path.basename(m)
    cpu, ref, llama = (load(f"{out}/{name}.{k}.json") for k in ("cpu", "ref", "llama"))
    if not cpu:
        print(f"| {name} | headroom bench failed | | | | | | |")
        continue
    for kind in ("pp", "tg"):
        mine = next((r for r in cpu["results"] if r["test"].startswith(kind)), None)
        if not mine:
            continue
        base = next((r for r in (ref or {}).get("results", []) if r["test"].startswith(kind)), None)
        peer = None
        for r in llama or []:
            if (kind == "pp" and r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0) or \
               (kind == "tg" and r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0):
                peer = r.get("avg_ts")
        share = f"{100 * mine['bandwidth_share']:.0f}%" if "bandwidth_share" in mine else ""
        cells = [name, mine["test"], f"{mine['tokens_per_second']:.1f} ± {mine['sd']:.1f}",
                 f"{base['tokens_per_second']:.1f} ({base['test']})" if base else "-",
                 f"{mine['tokens_per_second'] / base['tokens_per_second']:.1f}×" if base else "-",
                 f"{peer:.1f}" if peer else "-",
                 f"{mine['tokens_per_second'] / peer:.2f}" if peer else "-", share]
        print("| " + " | ".join(cells) + " |")
    print(f"<!-- {name}: measured bandwidth {cpu['measured_bandwidth_gbps']:.1f} GB/s, {cpu['kernels']} -->")
PY
rm -rf "$out"
