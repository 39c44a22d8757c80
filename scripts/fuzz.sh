#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and fuzzes the GGUF parser for a bounded
# time; fails on any crash, leak, hang, oversized allocation or sanitizer report.
# Usage: scripts/fuzz.sh [SECONDS]   (default 60)
# A finding is written to build-fuzz/findings/; reproduce it with build-fuzz/fuzz/gguf_fuzz FILE,
# then add it to tests/data/gguf-malformed/ (scripts/gen_gguf_fixtures.py) once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
scripts/setup.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHEADROOM_FUZZ=ON -DHEADROOM_TESTS=OFF -DHEADROOM_BENCH=OFF -DHEADROOM_WERROR=ON >/dev/null
cmake --build build-fuzz --target gguf_fuzz -j "$(nproc)"

# The working corpus grows in build-fuzz/ from the committed seeds, which stay untouched.
work=build-fuzz/corpus/gguf
mkdir -p "$work" build-fuzz/findings
# -max_len: the seeds are under 2 KiB; 16 KiB leaves room for long arrays and many tensors.
# -malloc_limit_mb: parsing a 16 KiB input may allocate ~256 KiB (tests/gguf/alloc_test.cpp), so
#   any single allocation over 64 MiB is a bug. -timeout: a parse takes microseconds.
build-fuzz/fuzz/gguf_fuzz "$work" fuzz/corpus/gguf -dict=fuzz/gguf.dict \
  -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 -malloc_limit_mb=64 -timeout=10 \
  -artifact_prefix=build-fuzz/findings/ -print_final_stats=1
