#!/usr/bin/env bash
# Time to first token with a shared long system prompt: `headroom load` with
# bench/load/shared-system-prompt.jsonl against `headroom serve`, without and then with the prefix
# cache, same model and mix. Prints both load summaries (bench/RESULTS.md quotes them).
# Usage: scripts/bench/load-shared-prefix.sh [MODEL.gguf] [CLIENTS] [REQUESTS] [extra serve flags...]
set -euo pipefail
model=${1:-models/stories260K.gguf}
clients=${2:-4}
requests=${3:-48}
shift $(( $# < 3 ? $# : 3 ))
bin=${HEADROOM:-build/apps/headroom/headroom}
port=${PORT:-18097}
mix=bench/load/shared-system-prompt.jsonl
for cache in off on; do
  flags=()
  [[ $cache == off ]] && flags+=(--no-prefix-cache)
  "$bin" serve -m "$model" --port "$port" --slots "$clients" "${flags[@]}" "$@" \
    2>/tmp/load-shared-prefix.log &
  server=$!
  trap 'kill $server 2>/dev/null || true' EXIT
  for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done
  echo "== $(basename "$model"), prefix cache $cache, $clients clients, $requests requests"
  "$bin" load --endpoint "http://127.0.0.1:$port" --mix "$mix" -c "$clients" \
    --requests "$requests" --warmup 0
  kill "$server"
  wait "$server" 2>/dev/null || true
done
