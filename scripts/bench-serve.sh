#!/usr/bin/env bash
# Serving throughput: `headroom load` against `headroom serve` with 1 client and with 32, same
# model and mix, one after the other. Prints the load summaries (bench/RESULTS.md quotes them).
# Usage: scripts/bench-serve.sh MODEL.gguf [MIX.jsonl] [REQUESTS_AT_32]
set -euo pipefail
model=$1
mix=${2:-bench/load/default-mix.jsonl}
requests=${3:-64}
bin=${HEADROOM:-build/apps/headroom/headroom}
port=${PORT:-18095}
for clients in 1 32; do
  "$bin" serve -m "$model" --port "$port" --slots 32 --ctx 2048 2>/tmp/bench-serve.log &
  server=$!
  trap 'kill $server 2>/dev/null || true' EXIT
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
  n=$(( clients == 1 ? requests / 4 : requests ))
  echo "== $(basename "$model"), $(basename "$mix"), $clients client(s), $n requests"
  "$bin" load --endpoint "http://127.0.0.1:$port" --mix "$mix" -c "$clients" --requests "$n" --warmup 2
  kill "$server"; wait "$server" 2>/dev/null || true
done
