#!/usr/bin/env bash
# The checks of the CUDA backend that need an NVIDIA GPU, in one run (docs/cuda.md): the GPU as
# nvidia-smi sees it, the kernel tests against the reference (plain, then under compute-sanitizer
# memcheck when it is installed), whole forward passes on the GPU against golden and CPU logits,
# the decode matvec benchmark, and the planner's and the doctor's view of the GPU through NVML.
# Usage: scripts/cuda-check.sh [BUILD_DIR] [LOG_DIR]
#   BUILD_DIR  a build with the CUDA backend (default: build); only its binaries are used
#   LOG_DIR    where each step's full output goes (default: BUILD_DIR/cuda-check)
# Exits non-zero when a test fails or a step cannot run; prints a summary table last.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
logs=${2:-$build/cuda-check}
mkdir -p "$logs"
tests=$build/tests/kernels/cuda_backend_tests
model_tests=$build/tests/model/cuda_model_tests
bench=$build/bench/kernels/cuda_matvec_bench
headroom=$build/apps/headroom/headroom
status=0
summary=()

step() {  # step NAME COMMAND...: runs COMMAND, output to LOG_DIR/NAME.log and the terminal
  local name=$1
  shift
  echo "== $name: $*"
  if "$@" 2>&1 | tee "$logs/$name.log"; then
    summary+=("ok    $name")
  else
    summary+=("FAIL  $name (see $logs/$name.log)")
    status=1
  fi
}

step gpu nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.max.sm,clocks.mem,power.limit,pcie.link.gen.current,pcie.link.width.current --format=csv
step tests "$tests" --gtest_color=no
step model_tests "$model_tests" --gtest_color=no
step bench "$bench"
step plan "$headroom" plan --shape gemma4-e2b --quant q4_k_m --ctx 8192
step plan_json "$headroom" plan --shape gemma4-e2b --quant q4_k_m --ctx 8192 --json
# The doctor reads the GPU's clocks, power and throttle reasons through NVML while it measures.
step doctor "$headroom" doctor -m models/stories260K.gguf --json
if command -v compute-sanitizer >/dev/null; then
  # Last, and bounded: memcheck slows kernels many times over. The matmul case at full size takes
  # longest under it; the other cases cover every other kernel.
  step memcheck timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 "$tests" \
    --gtest_color=no --gtest_filter='-CudaBackendTest.MatmulMatchesTheReferenceForEveryTypeAndBatch'
fi

echo
printf '%s\n' "${summary[@]}"
exit $status
