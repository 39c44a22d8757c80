#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds headroom and runs the whole test suite.
# Usage: scripts/test.sh            Release build in build/
#        scripts/test.sh --sanitize ASan + UBSan build of the unit tests in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ "${1:-}" = "--sanitize" ]; then
  scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEADROOM_SANITIZE=ON -DHEADROOM_BENCH=OFF
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
else
  scripts/build.sh build
  ctest --test-dir build --output-on-failure -j "$(nproc)"
fi
