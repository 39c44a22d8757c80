#!/usr/bin/env bash
# The checks of the CUDA backend that need an NVIDIA GPU, in one run that a GPU session starts with
# (docs/cuda.md, issue 18 item 8): the GPU as nvidia-smi sees it, the kernels' lane tests (host
# code, a check that this build runs here), the kernel tests against the reference, whole forward
# passes on the GPU (recorded, then op by op) against golden, CPU and reference-backend logits, the
# decode matvec benchmark, the planner's and the doctor's view of the GPU through NVML, the
# end-to-end benches and split runs (CUDA_CHECK_E2E), then the kernel tests under compute-sanitizer
# memcheck.
# Kernel tests: backend_cases_tests' CUDA table (every op against the reference) and
# cuda_backend_tests (the backend's refusals).
#
# Usage: scripts/cuda-check.sh [BUILD_DIR] [LOG_DIR]
#        scripts/cuda-check.sh --binaries [BUILD_DIR]   the binaries it runs, one per line
#   BUILD_DIR  a build with the CUDA backend for this GPU's architecture, e.g. sm_90 built on a
#              CPU machine (default: build). Only its binaries are used: nothing is rebuilt.
#   LOG_DIR    where each step's full output goes (default: BUILD_DIR/cuda-check)
#   CUDA_CHECK_BUDGET_S  the whole run's time limit in seconds (default 570: under 10 minutes).
#                        Each step is cut at its own limit or at what is left of the budget; a
#                        step with under 10 s left is not started.
#   CUDA_CHECK_E2E       end-to-end benches (default 1; 0 skips them): random-weight E2B and E4B
#                        at Q4_K_M and Q8_0 are synthesized in the background while the tests run
#                        (LOG_DIR/models, about 22 GB), then `headroom bench` pp512/tg128 at depth
#                        0 and 4096 on each, with and without recorded passes (CUDA graphs); then
#                        the first model with 1, 2, 4 and 8 layers on the CPU (--cpu-layers).
#   CUDA_CHECK_E2E_MODELS  the models, as SHAPE:TYPE of `headroom synth` (default
#                        "e2b:q4_k_m e2b:q8_0 e4b:q4_k_m e4b:q8_0")
#   CUDA_CHECK_E2E_RECORDED  the benches' HEADROOM_RECORD_PASSES values (default "0 1": op by op,
#                        then with each decode step replayed as a CUDA graph)
#   CUDA_CHECK_DRAFT     speculative decoding per model (default 1; 0 skips): tg128 with up to 4
#                        drafts a step by prompt lookup and by an always-right drafter; the first
#                        model as a small draft model (its own KV cache on the GPU) of each model,
#                        itself included; on the first model a Gemma 4 assistant drafter on the GPU
#                        (random, E2B assistant-shaped, written by tests/reference/write_assistant.py
#                        where the machine's python3 has numpy): tg128 drafting 3 with it, its
#                        steps' cost; and E2B drafting for 31B, both Q4_K_M of `synth --no-weights`
#                        (zeros: both pick token 0, so every draft is kept: the cost side of a
#                        small draft model beside a big target)
#   CUDA_CHECK_PEER      a llama-bench built with CUDA for this GPU (default: none): the same files,
#                        whole model on the GPU, flash attention, pp512/tg128 at depth 0 and 4096
#   CUDA_CHECK_SPLITS    the split runs (default 1; 0 skips)
#   CUDA_CHECK_PROFILE   with ncu on the machine (default 1; 0 skips): each kernel's time in a few
#                        decode steps of the first model, caches and clocks left alone, at depth 0
#                        and (attention only) at depth 4096
#
# Ends with a table of every step (ok; skips: gtest skipped some; FAIL; TIMEOUT: over the step's own
# limit; cut: stopped by the budget; not run, and why), with gtest's counts and the seconds each
# took, also written to LOG_DIR/summary.txt. Exit status: 1 when a step failed or timed out, else 2
# when a step was cut or not run or tests were skipped (no GPU, a missing binary or tool), else 0.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
list_binaries=0
[[ ${1:-} == --binaries ]] && list_binaries=1 && shift
build=${1:-build}
logs=${2:-$build/cuda-check}
budget=${CUDA_CHECK_BUDGET_S:-570}
kernel_tests=$build/tests/kernels/cuda_backend_tests
cases_tests=$build/tests/kernels/backend_cases_tests
lane_tests=(cuda_lanes_tests cuda_attention_lanes_tests cuda_fused_lanes_tests cuda_lora_lanes_tests)
model_tests=$build/tests/model/cuda_model_tests
bench=$build/bench/kernels/cuda_matvec_bench
headroom=$build/apps/headroom/headroom
if ((list_binaries)); then  # what scripts/gpu-pack.sh carries to a GPU machine
  printf '%s\n' "$headroom" "$bench" "$kernel_tests" "$cases_tests" \
    "${lane_tests[@]/#/$build/tests/kernels/}" "$model_tests"
  exit 0
fi
mkdir -p "$logs"
deadline=$((SECONDS + budget))
failed=0
incomplete=0
rows=()

row() {  # row RESULT NAME SECONDS NOTE: one line of the summary table
  rows+=("$(printf '%-8s %-28s %6s  %s' "$1" "$2" "$3" "$4")")
}

not_run() {  # not_run NAME WHY
  row "not run" "$1" "-" "$2"
  incomplete=1
}

# gtest's own count of what ran, from a step's log: "12 passed, 3 skipped" (empty if not gtest).
gtest_counts() {
  local log=$1 passed skipped failed_tests
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  failed_tests=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  [[ -z $passed && -z $skipped && -z $failed_tests ]] && return
  local note="${passed:-0} passed"
  [[ -n $skipped ]] && note+=", $skipped skipped"
  [[ -n $failed_tests ]] && note+=", $failed_tests failed"
  echo "$note"
}

# step NAME LIMIT_S COMMAND...: runs COMMAND under the smaller of LIMIT_S and the budget left, its
# output to LOG_DIR/NAME.log and the terminal; a step whose binary is missing is not run, and one
# whose gtest log reports skipped tests is marked "skips" (a GPU test skips without a GPU).
step() {
  local name=$1 limit=$2
  shift 2
  local arg previous=
  for arg in "$@"; do  # the command, or the binary a tool (compute-sanitizer) runs; not an output
    if [[ $arg == "$build"/* && $previous != -o && ! -e $arg ]]; then
      not_run "$name" "missing $arg (not built in BUILD_DIR)"
      return
    fi
    previous=$arg
  done
  local left=$((deadline - SECONDS))
  if ((left < 10)); then
    not_run "$name" "time budget spent"
    return
  fi
  local cut_by_budget=0
  ((limit > left)) && limit=$left cut_by_budget=1
  echo "== $name (limit ${limit}s): $*"
  local log=$logs/$name.log start=$SECONDS rc
  timeout "$limit" "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local took=$((SECONDS - start)) note
  note=$(gtest_counts "$log")
  if ((rc == 124 && cut_by_budget)); then
    row "cut" "$name" "$took" "stopped when the ${budget}s budget ran out; see $log"
    incomplete=1
  elif ((rc == 124)); then
    row "TIMEOUT" "$name" "$took" "over its ${limit}s limit; see $log"
    failed=1
  elif ((rc != 0)); then
    row "FAIL" "$name" "$took" "exit $rc${note:+; $note}; see $log"
    failed=1
  else
    if [[ $note == *skipped* ]]; then
      row "skips" "$name" "$took" "$note"
      incomplete=1
    else
      row "ok" "$name" "$took" "$note"
    fi
  fi
}

# Random weights, not --no-weights zeros: zeros can take a kernel's shortest path and time faster
# than real data. Synthesized at low priority while the tests run; each bench waits for its file.
read -ra e2e_models <<<"${CUDA_CHECK_E2E_MODELS:-e2b:q4_k_m e2b:q8_0 e4b:q4_k_m e4b:q8_0}"

models_dir=$logs/models
synth_pid=
if [[ ${CUDA_CHECK_E2E:-1} != 0 && -x $headroom ]]; then
  mkdir -p "$models_dir"
  (
    for m in "${e2e_models[@]}"; do
      file=$models_dir/${m/:/-}
      [[ -f $file.gguf ]] && continue
      nice -n 19 "$headroom" synth --shape "${m%%:*}" --type "${m#*:}" -o "$file.part" &&
        mv "$file.part" "$file.gguf"
    done
    if [[ ${CUDA_CHECK_DRAFT:-1} != 0 ]]; then
      for shape in e2b 31b; do  # sparse files: seconds each
        file=$models_dir/$shape-q4_k_m-zeros
        [[ -f $file.gguf ]] && continue
        "$headroom" synth --shape $shape --type q4_k_m --no-weights -o "$file.part" &&
          mv "$file.part" "$file.gguf"
      done
    fi
  ) >"$logs/synth.log" 2>&1 &
  synth_pid=$!
fi

# wait_for_model NAME: until the background synth wrote it, gave up, or the budget is nearly spent.
wait_for_model() {
  while [[ ! -f $models_dir/$1.gguf ]] && kill -0 "$synth_pid" 2>/dev/null &&
    ((deadline - SECONDS > 10)); do
    sleep 1
  done
}

# The model tests' float64 references need numpy: a GPU machine's Debian python3 may lack it where
# the python3 on PATH (a framework's environment) has it.
if [[ -z ${HEADROOM_TEST_PYTHON:-} ]] && ! /usr/bin/python3 -c 'import numpy' 2>/dev/null &&
  python3 -c 'import numpy' 2>/dev/null; then
  HEADROOM_TEST_PYTHON=$(command -v python3)
  export HEADROOM_TEST_PYTHON
fi
echo "cuda-check: $(git rev-parse --short HEAD 2>/dev/null || echo 'no git') $(git status --porcelain 2>/dev/null | grep -q . && echo '(uncommitted changes)'), build $build, budget ${budget}s"
if command -v nvidia-smi >/dev/null; then
  step gpu 30 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.max.sm,clocks.mem,power.limit,pcie.link.gen.current,pcie.link.width.current --format=csv
else
  not_run gpu "nvidia-smi not found (no driver?)"
fi
for t in "${lane_tests[@]}"; do
  step "$t" 60 "$build/tests/kernels/$t" --gtest_color=no
done
step tests 180 "$kernel_tests" --gtest_color=no
step cases 180 "$cases_tests" --gtest_color=no --gtest_filter='*CudaTable*'
step model_tests 180 "$model_tests" --gtest_color=no
# The same passes op by op (recorded steps, the default, off), but for the tests that record.
step model_tests_unrecorded 180 env HEADROOM_RECORD_PASSES=0 "$model_tests" --gtest_color=no
step bench 120 "$bench"
step plan 30 "$headroom" plan --shape gemma4-e2b --quant q4_k_m --ctx 8192
step plan_json 30 "$headroom" plan --shape gemma4-e2b --quant q4_k_m --ctx 8192 --json
# The doctor reads the GPU's clocks, power and throttle reasons through NVML while it measures.
step doctor 60 "$headroom" doctor -m models/stories260K.gguf --json
if [[ -n $synth_pid ]]; then
  # Depth 4096 with a 512-token prompt on top needs a context of at least 4608.
  read -ra recorded_modes <<<"${CUDA_CHECK_E2E_RECORDED:-0 1}"
  for m in "${e2e_models[@]}"; do
    m=${m/:/-}
    wait_for_model "$m"
    for graphs in "${recorded_modes[@]}"; do
      name=e2e_$m
      ((graphs)) && name+=_graphs
      step "$name" 150 env HEADROOM_RECORD_PASSES=$graphs "$headroom" bench -m "$models_dir/$m.gguf" \
        -c 8192 -p 512 -n 128 -r 3 --ctx-depth 0,4096
    done
    if [[ ${CUDA_CHECK_DRAFT:-1} != 0 ]]; then
      step "e2e_${m}_draft" 150 "$headroom" bench -m "$models_dir/$m.gguf" -c 8192 -p 0 -n 128 \
        -r 3 --ctx-depth 0,4096 --draft 4 --oracle-drafts
    fi
    if [[ -n ${CUDA_CHECK_PEER:-} ]]; then
      step "peer_$m" 150 "$CUDA_CHECK_PEER" -m "$models_dir/$m.gguf" -ngl 99 -fa 1 -p 512 -n 128 \
        -d 0,4096 -r 3
    fi
  done
  first=${e2e_models[0]/:/-}
  if [[ ${CUDA_CHECK_DRAFT:-1} != 0 ]]; then
    # Random weights: the first model drafting for itself keeps its drafts where a one-row pass of
    # the draft model gives the target's bits; for another model its drafts are rejected, which
    # measures what the draft model's passes cost until the measured acceptance stops them.
    for m in "${e2e_models[@]}"; do
      m=${m/:/-}
      step "e2e_${m}_draft_model" 150 "$headroom" bench -m "$models_dir/$m.gguf" -c 8192 -p 0 \
        -n 128 -r 3 --draft 3 --draft-model "$models_dir/$first.gguf" --oracle-drafts
    done
    wait_for_model 31b-q4_k_m-zeros
    step e2e_31b_zeros_draft_model 150 "$headroom" bench -m "$models_dir/31b-q4_k_m-zeros.gguf" \
      -c 4096 -p 0 -n 64 -r 3 --draft 3 --draft-model "$models_dir/e2b-q4_k_m-zeros.gguf" \
      --oracle-drafts
  fi
  profiler=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [[ ${CUDA_CHECK_PROFILE:-1} != 0 && -n $profiler ]]; then
    # Caches and clocks left as they are, so the times are a graph replay's, not a cold kernel's.
    ncu_time=("$profiler" --clock-control none --cache-control none --metrics gpu__time_duration.sum
      --print-summary per-kernel)
    step "profile_${first}" 120 "${ncu_time[@]}" "$headroom" bench -m "$models_dir/$first.gguf" \
      -c 8192 -p 0 -n 8 -r 1
    step "profile_${first}_attention_4096" 120 "${ncu_time[@]}" --kernel-name regex:attention_ \
      "$headroom" bench -m "$models_dir/$first.gguf" -c 8192 -p 0 -n 8 -r 1 --ctx-depth 4096
  fi
  if [[ ${CUDA_CHECK_DRAFT:-1} != 0 ]]; then
    # Random weights: its drafts are rejected, so this measures what drafting with it costs (its
    # steps on the GPU, the verification rows) until the measured acceptance stops it.
    drafter=$models_dir/$first.assistant.gguf
    if python3 -c 'import numpy' 2>/dev/null; then
      step "assistant_drafter_${first}" 120 python3 tests/reference/write_assistant.py \
        "$models_dir/$first.gguf" -o "$drafter" --n-embd 256 --n-layer 4 --n-ff 2048 --type q8_0
      step "e2e_${first}_assistant" 150 "$headroom" bench -m "$models_dir/$first.gguf" -c 8192 \
        -p 0 -n 128 -r 3 --draft 3 --draft-model "$drafter"
    else
      not_run "e2e_${first}_assistant" "python3 with numpy not found (tests/reference/write_assistant.py)"
    fi
  fi
  if [[ ${CUDA_CHECK_SPLITS:-1} != 0 ]]; then
    # Split runs: the first N layers on the CPU, the rest on the GPU, against the plan's prediction
    # (its "predicted decode" line).
    for n in 1 2 4 8; do
      step "split_${first}_cpu_layers_$n" 90 "$headroom" bench -m "$models_dir/$first.gguf" \
        -c 4096 -p 0 -n 64 -r 2 --cpu-layers "$n"
    done
  fi
  kill "$synth_pid" 2>/dev/null
else
  not_run e2e "CUDA_CHECK_E2E=0 or no headroom binary"
fi
# The toolkit's bin directory is often not on PATH on a GPU machine.
cuda_home=${CUDA_HOME:-/usr/local/cuda}
sanitizer=$(command -v compute-sanitizer)
for candidate in "$cuda_home"/bin/compute-sanitizer "$cuda_home"/compute-sanitizer/compute-sanitizer; do
  [[ -z $sanitizer && -x $candidate ]] && sanitizer=$candidate
done
if [[ -n $sanitizer ]]; then
  # Last, and bounded: memcheck slows kernels many times over.
  step memcheck_cases 300 "$sanitizer" --tool memcheck --error-exitcode 1 "$cases_tests" \
    --gtest_color=no --gtest_filter='*CudaTable*'
  step memcheck 60 "$sanitizer" --tool memcheck --error-exitcode 1 "$kernel_tests" --gtest_color=no
else
  not_run memcheck_cases "compute-sanitizer not found on PATH or in $cuda_home"
  not_run memcheck "compute-sanitizer not found on PATH or in $cuda_home"
fi

{
  echo
  printf '%-8s %-28s %6s  %s\n' result step seconds note
  printf '%s\n' "${rows[@]}"
  if ((failed)); then
    echo "cuda-check: FAILED (see the logs in $logs)"
  elif ((incomplete)); then
    echo "cuda-check: incomplete: steps not run or tests skipped, listed above"
  else
    echo "cuda-check: every step passed in $((SECONDS - deadline + budget))s"
  fi
} | tee "$logs/summary.txt"
((failed)) && exit 1
((incomplete)) && exit 2
exit 0
