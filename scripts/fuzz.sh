#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and fuzzes, for a bounded time in all,
# the GGUF parser (two fifths of the time), request parsing and JSON-schema compilation (a fifth
# each), the image and the audio decoders (a tenth each); fails on any crash, leak, hang,
# oversized allocation or sanitizer report.
# Usage: scripts/fuzz.sh [SECONDS]   (default 60, the total)
# A finding is written to build-fuzz/findings/; reproduce it with build-fuzz/fuzz/TARGET FILE.
# A GGUF finding goes to tests/data/gguf-malformed/ (scripts/gen_gguf_fixtures.py) once fixed; a
# request or schema finding becomes a case in tests/server/hostile_test.cpp or tests/sample/; an
# image or audio finding a case in tests/mm/ (or tests/server/media_test.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
scripts/setup.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHEADROOM_FUZZ=ON -DHEADROOM_TESTS=OFF -DHEADROOM_BENCH=OFF -DHEADROOM_WERROR=ON >/dev/null
cmake --build build-fuzz --target gguf_fuzz request_fuzz schema_fuzz image_fuzz audio_fuzz -j "$(nproc)"
mkdir -p build-fuzz/findings

# fuzz TARGET SECONDS [libFuzzer flags]: the working corpus grows in build-fuzz/ from the
# committed seeds in fuzz/corpus/, which stay untouched.
fuzz() {
  local target=$1 time=$2
  shift 2
  mkdir -p "build-fuzz/corpus/$target"
  "build-fuzz/fuzz/${target}_fuzz" "build-fuzz/corpus/$target" "fuzz/corpus/$target" -max_total_time="$time" \
    -rss_limit_mb=2048 -artifact_prefix="build-fuzz/findings/${target}-" -print_final_stats=1 "$@"
}

# GGUF: the seeds are under 2 KiB; 16 KiB leaves room for long arrays and many tensors. Parsing a
# 16 KiB input may allocate ~256 KiB (tests/gguf/alloc_test.cpp), so any single allocation over
# 64 MiB is a bug. A parse takes microseconds.
fuzz gguf $((seconds * 2 / 5)) -dict=fuzz/gguf.dict -max_len=16384 -malloc_limit_mb=64 -timeout=10
# Requests and schemas: 64 KiB bodies reach the depth limit many times over; compiling a schema
# and masking 8 tokens over the 512-token vocabulary takes milliseconds.
fuzz request $((seconds / 5)) -dict=fuzz/json.dict -max_len=65536 -malloc_limit_mb=256 -timeout=10
fuzz schema $((seconds / 5)) -dict=fuzz/json.dict -max_len=8192 -malloc_limit_mb=256 -timeout=10
# Images and audio: the seeds are 3–4 KiB; decoding is bounded to 1 Mi pixels (3 MiB of RGB, and a
# progressive JPEG's coefficients) and clips to 0.5 s, so an allocation over 64 MiB is a bug. Audio
# inputs stay under 4 KiB: resampling (best sinc) under the sanitizers is what a run spends on.
fuzz image $((seconds / 10)) -max_len=16384 -malloc_limit_mb=64 -timeout=10
fuzz audio $((seconds - seconds * 2 / 5 - seconds / 5 - seconds / 5 - seconds / 10)) -max_len=4096 \
  -malloc_limit_mb=64 -timeout=10
