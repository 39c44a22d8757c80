#!/usr/bin/env bash
# headroom bench against its own scalar reference backend and, if given, llama.cpp's llama-bench,
# on the same GGUF files in the same run; prints a markdown table of tok/s and ratios.
#
# Usage: scripts/bench-peer.sh [-t THREADS] [-p N_PROMPT] [-n N_GEN] [-r REPS] [-d DEPTHS] [-R ROUNDS]
#                              [--no-ref] MODEL.gguf... [-- LLAMA_BENCH]
#   Models: e.g. `headroom synth --shape e2b --type q4_k_m --no-weights -o e2b.gguf` (a sparse file
#   whose weights read as zeros: the same bytes and arithmetic as random weights, written in
#   milliseconds), `headroom synth --arch llama --shape 25m --type q8_0 -o llama25m.gguf`.
#   LLAMA_BENCH: path to a llama-bench binary built elsewhere (this script never builds it).
#   DEPTHS: context depths to test at, e.g. 0,4096 (headroom --ctx-depth, llama-bench -d).
#   ROUNDS: the two engines run alternately this many times per model; the table gives each
#   test's median over the rounds (each round's figure is the mean of REPS repetitions).
#   --no-ref: skip the scalar baseline (it is ~50× slower).
# The scalar baseline runs with smaller -p/-n on models over 1 GiB.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=2 n_prompt=128 n_gen=32 reps=3 depths=0 rounds=1 with_ref=1
models=() llama_bench=""
while [ $# -gt 0 ]; do
  case "$1" in
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -d) depths=$2; shift 2 ;;
    -R) rounds=$2; shift 2 ;;
    --no-ref) with_ref=0; shift ;;
    --) llama_bench=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
    *) models+=("$1"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || { echo "usage: $0 [-t T] [-p N] [-n N] [-r R] [-d D,D] [-R ROUNDS] [--no-ref] MODEL.gguf... [-- LLAMA_BENCH]" >&2; exit 2; }
headroom=build/apps/headroom/headroom
[ -x "$headroom" ] || { echo "build headroom first (scripts/build.sh)" >&2; exit 2; }
if [ -n "$llama_bench" ] && [ ! -x "$llama_bench" ]; then
  echo "no llama-bench at $llama_bench: comparing with the scalar baseline only" >&2
  llama_bench=""
fi
out=$(mktemp -d)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores; threads $threads; $(date -u +%F); load average $(cut -d' ' -f1-3 /proc/loadavg)"
for m in "${models[@]}"; do
  name=$(basename "$m")
  for round in $(seq 1 "$rounds"); do
    "$headroom" bench -m "$m" -t "$threads" -p "$n_prompt" -n "$n_gen" -r "$reps" --ctx-depth "$depths" \
      --json 2>/dev/null > "$out/$name.cpu.$round.json" || echo "headroom bench could not run $name" >&2
    if [ -n "$llama_bench" ]; then
      "$llama_bench" -m "$m" -t "$threads" -p "$n_prompt" -n "$n_gen" -r "$reps" -d "$depths" -o json \
        2>/dev/null > "$out/$name.llama.$round.json" || echo "llama-bench could not run $name" >&2
    fi
  done
  if [ "$with_ref" = 1 ]; then
    size=$(stat -c %s "$m")
    if [ "$size" -gt $((1 << 30)) ]; then rp=16 rn=4 rr=1; else rp=$n_prompt rn=$n_gen rr=$reps; fi
    "$headroom" bench -m "$m" -t "$threads" -p "$rp" -n "$rn" -r "$rr" --backend ref --json 2>/dev/null > "$out/$name.ref.json"
  fi
done
/usr/bin/python3 - "$out" "$rounds" "${models[@]}" <<'PY'
import json, os, statistics, sys
out, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def median(values):
    values = [v for v in values if v]
    return statistics.median(values) if values else None
print("\n| model | test | depth | headroom tok/s | scalar ref tok/s | headroom / ref | llama.cpp tok/s | headroom / llama.cpp | tg roofline share |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for m in models:
    name = os.path.basename(m)
    cpus = [load(f"{out}/{name}.cpu.{r}.json") for r in range(1, rounds + 1)]
    llamas = [load(f"{out}/{name}.llama.{r}.json") for r in range(1, rounds + 1)]
    ref = load(f"{out}/{name}.ref.json")
    cpu = next((c for c in cpus if c), None)
    if not cpu:
        print(f"| {name} | headroom bench failed | | | | | | | |")
        continue
    for mine in cpu["results"]:
        kind, depth = mine["test"][:2], mine.get("depth", 0)
        same = lambda r: r["test"] == mine["test"] and r.get("depth", 0) == depth
        tps = median([next((r["tokens_per_second"] for r in c["results"] if same(r)), None)
                      for c in cpus if c])
        base = next((r for r in (ref or {}).get("results", [])
                     if r["test"].startswith(kind) and r.get("depth", 0) == 0), None) if depth == 0 else None
        def peer_of(llama):
            for r in llama or []:
                if r.get("n_depth", 0) != depth:
                    continue
                if (kind == "pp" and r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0) or \
                   (kind == "tg" and r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0):
                    return r.get("avg_ts")
            return None
        peer = median([peer_of(l) for l in llamas])
        share = f"{100 * mine['bandwidth_share']:.0f}%" if "bandwidth_share" in mine else ""
        cells = [name, mine["test"], str(depth),
                 f"{tps:.2f}" + (f" ± {mine['sd']:.2f}" if rounds == 1 else ""),
                 f"{base['tokens_per_second']:.1f} ({base['test']})" if base else "-",
                 f"{tps / base['tokens_per_second']:.1f}×" if base else "-",
                 f"{peer:.2f}" if peer else "-",
                 f"{tps / peer:.2f}" if peer else "-", share]
        print("| " + " | ".join(cells) + " |")
    print(f"<!-- {name}: measured bandwidth {cpu['measured_bandwidth_gbps']:.1f} GB/s, {cpu['kernels']}; "
          f"{rounds} round(s), medians -->")
PY
rm -rf "$out"
