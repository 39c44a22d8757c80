#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds headroom and runs the whole test suite.
# Usage: scripts/test.sh            Release build in build/
#        scripts/test.sh --sanitize ASan + UBSan build of the unit tests in build-asan/
# Prints each step's time, so a slow CI run says where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
step() {
  local name=$1 t
  shift
  t=$(date +%s)
  "$@"
  echo "test.sh: $name took $(($(date +%s) - t)) s"
}
step setup scripts/setup.sh
if [ "${1:-}" = "--sanitize" ]; then
  step build scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEADROOM_SANITIZE=ON -DHEADROOM_BENCH=OFF
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  step tests ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
else
  step build scripts/build.sh build
  step tests ctest --test-dir build --output-on-failure -j "$(nproc)"
fi
