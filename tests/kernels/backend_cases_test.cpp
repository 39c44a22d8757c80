// Every case of the kernel table (backend_cases.h) on every backend this machine has — the CPU
// backend at each instruction-set level the CPU supports, the emulated GPU, and the CUDA backend
// where the build has it and a GPU exists — against kernels::ref::RefBackend, whose fused ops are
// the composed defaults of ops.cpp over the reference primitives. One test per family of ops for
// the host backends together, one per family for CUDA (skipped with the reason without a GPU:
// `--gtest_filter='*CudaTable*'` runs only those), and a self-test of the table's checks.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend_cases.h"
#include "kernels/cpu/backend.h"
#include "kernels/ref/ref.h"
#include "testing/emulated_gpu.h"
#include "testing/testing.h"
#include "util/thread_pool.h"

#ifdef HEADROOM_WITH_CUDA
#include "kernels/cuda/backend.h"
#endif

namespace {

using backend_cases::Outputs;
using backend_cases::Target;
using kernels::cpu::Isa;

enum class Kind { kCpuScalar, kCpuAvx2, kCpuAvx512, kCpuAvx512Vnni, kEmulatedGpu, kCuda };

std::string kind_name(Kind kind) {
  switch (kind) {
    case Kind::kCpuScalar:
      return "cpu_scalar";
    case Kind::kCpuAvx2:
      return "cpu_avx2";
    case Kind::kCpuAvx512:
      return "cpu_avx512";
    case Kind::kCpuAvx512Vnni:
      return "cpu_avx512vnni";
    case Kind::kEmulatedGpu:
      return "emulated_gpu";
    case Kind::kCuda:
      return "cuda";
  }
  return "?";
}

// A backend made once per process (the CUDA one costs a context), or why there is none.
struct Made {
  std::unique_ptr<kernels::Backend> backend;
  Target target;
  std::string missing;
};

util::ThreadPool& pool() {
  static util::ThreadPool p(2);
  return p;
}

Made make_cpu(Isa isa) {
  Made m;
  if (!kernels::cpu::cpu_supports(isa)) {
    m.missing = "cpu: this CPU has no " + std::string(kernels::cpu::isa_name(isa));
    return m;
  }
  m.backend = std::make_unique<kernels::cpu::CpuBackend>(pool(), backend_cases::kMaxTokens,
                                                         backend_cases::kMaxCols, isa);
  m.target.activation_rounding = [isa](kernels::DType type, int, bool) {
    return backend_cases::cpu_activation_rounding(type, isa);
  };
  return m;
}

// Its ops are the CPU backend's at this CPU's level: the same rounding, 8-bit inputs checked and
// then unused.
Made make_emulated_gpu() {
  Made m;
  m.backend = std::make_unique<testing_util::EmulatedGpu>(pool(), backend_cases::kMaxTokens,
                                                          backend_cases::kMaxCols);
  m.target.activation_rounding = [](kernels::DType type, int, bool) {
    return backend_cases::cpu_activation_rounding(type, kernels::cpu::cpu_isa());
  };
  return m;
}

#ifdef HEADROOM_WITH_CUDA
// Decode products (T ≤ kActQ8MaxTokens) multiply the 8-bit activations when given them (the types
// with integer kernels); the others the f32 values. Its exp is CUDA's.
Made make_cuda() {
  Made m;
  auto backend = kernels::cuda::make_cuda_backend(0);
  if (!backend.ok()) {
    m.missing = backend.error().message();
    return m;
  }
  m.backend = std::move(backend).value();
  m.target.activation_rounding = [](kernels::DType, int n_tokens, bool q8_given) {
    using Rounding = backend_cases::ActivationRounding;
    if (q8_given && n_tokens <= kernels::kActQ8MaxTokens)
      return Rounding{Rounding::Kind::kGiven8Bit};
    return Rounding{};
  };
  m.target.host_libm = false;
  return m;
}
#endif

Made make(Kind kind) {
  switch (kind) {
    case Kind::kCpuScalar:
      return make_cpu(Isa::kScalar);
    case Kind::kCpuAvx2:
      return make_cpu(Isa::kAvx2);
    case Kind::kCpuAvx512:
      return make_cpu(Isa::kAvx512);
    case Kind::kCpuAvx512Vnni:
      return make_cpu(Isa::kAvx512Vnni);
    case Kind::kEmulatedGpu:
      return make_emulated_gpu();
    case Kind::kCuda:
#ifdef HEADROOM_WITH_CUDA
      return make_cuda();
#else
      return {nullptr, {}, "cuda: this build has no CUDA backend (no nvcc at configure time)"};
#endif
  }
  return {};
}

Made& made(Kind kind) {
  static std::map<Kind, Made> all;
  auto it = all.find(kind);
  if (it == all.end()) {
    it = all.emplace(kind, make(kind)).first;
    it->second.target.name = kind_name(kind);
    it->second.target.backend = it->second.backend.get();
  }
  return it->second;
}

// The truth of a case, computed once per process whatever the backends.
const Outputs* reference(const backend_cases::OpCase& c) {
  static kernels::ref::RefBackend ref;
  static std::map<const backend_cases::OpCase*, Outputs> computed;
  auto it = computed.find(&c);
  if (it == computed.end()) {
    Outputs out;
    if (!backend_cases::run_case(c, ref, false, out)) return nullptr;
    it = computed.emplace(&c, std::move(out)).first;
  }
  return &it->second;
}

// Every case of `family` on one backend against the reference.
void expect_cases_match_the_reference(const Made& m, const std::string& family) {
  SCOPED_TRACE("on " + m.target.name);
  for (const auto& c : backend_cases::cases(family)) {
    SCOPED_TRACE(c->name());
    const Outputs* want = reference(*c);
    if (want == nullptr) continue;
    for (bool q8 : {false, true}) {
      if (q8 && !c->has_q8()) continue;
      SCOPED_TRACE(q8 ? "with 8-bit activations" : "with f32 activations");
      Outputs got;
      if (backend_cases::run_case(*c, *m.backend, q8, got)) c->check(got, *want, m.target, q8);
    }
  }
}

// The failures `check` reports, kept from the test's own record.
int failures_of(const std::function<void()>& check) {
  testing::TestPartResultArray results;
  {
    testing::ScopedFakeTestPartResultReporter reporter(
        testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    check();
  }
  int failed = 0;
  for (int i = 0; i < results.size(); ++i) failed += results.GetTestPartResult(i).failed();
  return failed;
}

// Spoils one value of `outputs` at a time — the first and the last value of each output grossly,
// one bit of the first byte of each byte output — calls `check(what)` with it spoiled, and puts it
// back.
void for_each_spoiled(Outputs& outputs, const std::function<void(const std::string&)>& check) {
  for (auto& [name, values] : outputs.f32) {
    if (values.empty()) continue;
    for (size_t i : {size_t{0}, values.size() - 1}) {
      const float kept = values[i];
      values[i] = std::isfinite(kept) ? kept + 1e3f * (1.0f + std::fabs(kept)) : 0.5f;
      check(name + " value " + std::to_string(i));
      values[i] = kept;
    }
  }
  for (auto& [name, values] : outputs.i32) {
    if (values.empty()) continue;
    for (size_t i : {size_t{0}, values.size() - 1}) {
      values[i] += 1;
      check(name + " value " + std::to_string(i));
      values[i] -= 1;
    }
  }
  for (auto& [name, values] : outputs.bytes) {
    if (values.empty()) continue;
    values[0] ^= 1;
    check(name + " byte 0");
    values[0] ^= 1;
  }
}

// The table cannot pass a wrong backend quietly: on the emulated GPU's outputs of every case (its
// 8-bit outputs included), spoiling any one output makes the case's check fail, while the outputs
// as they are pass. So every output a case reads back is compared, with a finite tolerance.
void expect_checks_catch_any_wrong_output(const Made& m, const std::string& family) {
  for (const auto& c : backend_cases::cases(family)) {
    SCOPED_TRACE(c->name());
    const Outputs* want = reference(*c);
    if (want == nullptr) continue;
    for (bool q8 : {false, true}) {
      if (q8 && !c->has_q8()) continue;
      Outputs got;
      if (!backend_cases::run_case(*c, *m.backend, q8, got)) continue;
      ASSERT_EQ(failures_of([&] { c->check(got, *want, m.target, q8); }), 0);
      for_each_spoiled(got, [&](const std::string& what) {
        EXPECT_GT(failures_of([&] { c->check(got, *want, m.target, q8); }), 0)
            << what << (q8 ? " (8-bit run)" : "") << " changed, and the check did not notice";
      });
    }
  }
}

std::string family_name(const testing::TestParamInfo<std::string>& family) {
  return testing_util::test_name(family.param);
}

// The host backends share one process per family, so the table and its reference are built once:
// the CPU backend at every level this CPU supports (the others are named in the output), and the
// emulated GPU.
class HostBackends : public testing::TestWithParam<std::string> {};

TEST_P(HostBackends, MatchTheReference) {
  std::string ran, missing;
  for (Kind kind : {Kind::kCpuScalar, Kind::kCpuAvx2, Kind::kCpuAvx512, Kind::kCpuAvx512Vnni,
                    Kind::kEmulatedGpu}) {
    const Made& m = made(kind);
    if (m.backend == nullptr) {
      missing.append(" ").append(kind_name(kind)).append(" (").append(m.missing).append(")");
      continue;
    }
    ran.append(" ").append(kind_name(kind));
    expect_cases_match_the_reference(m, GetParam());
  }
  std::cout << "ran on:" << ran << (missing.empty() ? "" : "; not on:") << missing << "\n";
}

TEST_P(HostBackends, ChecksCatchAnyWrongOutput) {
  expect_checks_catch_any_wrong_output(made(Kind::kEmulatedGpu), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Table, HostBackends, testing::ValuesIn(backend_cases::families()),
                         family_name);

// The CUDA backend, where the build has it and a GPU exists; skipped with the reason elsewhere.
class CudaTable : public testing::TestWithParam<std::string> {};

TEST_P(CudaTable, MatchesTheReference) {
  const Made& m = made(Kind::kCuda);
  if (m.backend == nullptr) GTEST_SKIP() << m.missing;
  expect_cases_match_the_reference(m, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Table, CudaTable, testing::ValuesIn(backend_cases::families()),
                         family_name);

}  // namespace
