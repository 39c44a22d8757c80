// CUDA decode matvec per weight type, one token: bytes read per call (weights + activations +
// output) over the median time → GB/s, and its ratio to the measured ceiling: a 1 GiB
// device-to-device cudaMemcpy (bytes read + written over its median time), the "measured device
// copy bandwidth" of issue #9; the datasheet peak (memory clock × bus width) is printed beside it.
// Decode is bandwidth-bound, so the ratio is the kernel's grade. Two paths per type: the f32
// activations of CudaBackend::matmul, and, for the types with 8-bit pieces (matvec_lanes.h), the
// decode path of CudaBackend::matmuls over 8-bit activations (dp4a, 16-byte loads); "x f32" is
// its speed-up. Prints "no GPU" and exits 0 on a machine without one.
//
// Usage: cuda_matvec_bench [ROWS COLS [TYPE]]   (TYPE, e.g. Q4_K: that type alone, for a profiler;
// default 16384 × 14336: even at 4 bits per weight,
// 132 MB, well past an H100's 50 MB L2, so repeated calls read DRAM). Times with the host clock
// around many queued launches, after a synchronize: launches queue faster than they run here.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/act_q8.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/matvec_lanes.h"
#include "tensor/dtype.h"

namespace {

using kernels::cuda::CudaBackend;
using tensor::DType;

constexpr int kRepeats = 50;
constexpr int kRounds = 7;  // median of these

// Seconds per call of `call`, median over rounds of kRepeats queued calls; negative on error.
template <class Call>
double time_calls(CudaBackend& gpu, Call&& call) {
  std::vector<double> rounds;
  call();  // warm-up: module load, first-touch
  if (!gpu.synchronize().ok()) return -1;
  for (int r = 0; r < kRounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRepeats; ++i) call();
    if (auto s = gpu.synchronize(); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.error().message().c_str());
      return -1;
    }
    rounds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRepeats);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

// Measured copy ceiling, GB/s (read + write) of a 1 GiB device-to-device copy; 0 on error.
double copy_ceiling_gbs(CudaBackend& gpu) {
  constexpr size_t kBytes = size_t{1} << 30;
  auto src = gpu.allocate(kBytes), dst = gpu.allocate(kBytes);
  if (!src.ok() || !dst.ok()) return 0;
  std::vector<double> rounds;
  bool ok = cudaMemcpy(*dst, *src, kBytes, cudaMemcpyDeviceToDevice) == cudaSuccess;  // warm-up
  for (int r = 0; ok && r < kRounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i)
      ok = ok && cudaMemcpy(*dst, *src, kBytes, cudaMemcpyDeviceToDevice) == cudaSuccess;
    ok = ok && cudaDeviceSynchronize() == cudaSuccess;
    rounds.push_back(
        2.0 * kBytes * 10 /
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 1e9);
  }
  gpu.release(*src);
  gpu.release(*dst);
  if (!ok) return 0;
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 2 ? std::atoll(argv[1]) : 16384;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 14336;
  auto backend = kernels::cuda::make_cuda_backend(0);
  if (!backend.ok()) {
    std::printf("no GPU: %s\n", backend.error().message().c_str());
    return 0;
  }
  CudaBackend& gpu = **backend;
  const auto& d = gpu.device();
  const double ceiling = copy_ceiling_gbs(gpu);
  std::printf(
      "%s (sm_%d%d, %d SMs, %.1f GiB): measured copy %.0f GB/s, datasheet peak %.0f GB/s; "
      "W %lld x %lld, 1 token\n",
      d.name.c_str(), d.sm_major, d.sm_minor, d.n_sm, d.total_bytes / 1073741824.0, ceiling,
      d.peak_gbs, static_cast<long long>(rows), static_cast<long long>(cols));
  std::printf("%-8s %10s | %10s %9s %7s %7s | %10s %9s %7s %7s\n", "type", "MB", "f32 us", "GB/s",
              "%copy", "%peak", "q8 us", "GB/s", "%copy", "x f32");

  std::mt19937 rng(1);
  std::vector<float> x(cols);
  for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  auto x_dev = gpu.allocate(cols * sizeof(float));
  auto y_dev = gpu.allocate(rows * sizeof(float));
  if (!x_dev.ok() || !y_dev.ok() || !gpu.upload(*x_dev, x.data(), x.size() * sizeof(float)).ok()) {
    std::fprintf(stderr, "cannot allocate the activations\n");
    return 1;
  }
  // The 8-bit form of x, as the op before a decode matmul writes it.
  const size_t q8_bytes = kernels::act_q8_fits(cols) ? kernels::act_q8_row_bytes(cols) : 0;
  std::vector<uint8_t> x_q8(q8_bytes);
  if (q8_bytes > 0) kernels::quantize_act_rows(x.data(), cols, 1, x_q8.data());
  auto x_q8_dev = gpu.allocate(q8_bytes > 0 ? q8_bytes : 16);
  if (!x_q8_dev.ok() || (q8_bytes > 0 && !gpu.upload(*x_q8_dev, x_q8.data(), q8_bytes).ok())) {
    std::fprintf(stderr, "cannot allocate the 8-bit activations\n");
    return 1;
  }
  const DType types[] = {DType::kF32,  DType::kF16,    DType::kBF16,   DType::kQ8_0,
                         DType::kQ4_0, DType::kQ4_1,   DType::kQ5_0,   DType::kQ5_1,
                         DType::kQ2_K, DType::kQ3_K,   DType::kQ4_K,   DType::kQ5_K,
                         DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kMXFP4};
  int failures = 0;
  const std::string only = argc > 3 ? argv[3] : "";
  for (DType type : types) {
    if (!tensor::check_row_length(type, cols).ok()) continue;
    if (!only.empty() && only != tensor::dtype_name(type)) continue;
    const size_t row_bytes = static_cast<size_t>(tensor::row_bytes(type, cols));
    // Random bytes: a matvec reads the same bytes whatever they hold; finite values do not matter
    // for timing (random f16 scales may decode to inf/nan, which costs nothing extra). A 64-bit
    // xorshift fills them: the mt19937 per byte would take longer than the timing.
    std::vector<uint8_t> bytes(row_bytes * rows);
    uint64_t state = rng() | 1;
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (i % 8 == 0) state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      bytes[i] =
          static_cast<uint8_t>((state >> (i % 8 * 8)) & 0x3b);  // keeps f16/bf16 exponents small
    }
    auto w_dev = gpu.allocate(bytes.size());
    if (!w_dev.ok() || !gpu.upload(*w_dev, bytes.data(), bytes.size()).ok()) {
      std::fprintf(stderr, "cannot upload %s weights\n", tensor::dtype_name(type).data());
      ++failures;
      continue;
    }
    const kernels::Matrix w{*w_dev, type, cols, rows, row_bytes};
    auto* x_f32 = static_cast<float*>(*x_dev);
    auto* y = static_cast<float*>(*y_dev);
    const auto f32_call = [&] { gpu.matmul(w, x_f32, y, 1); };
    const double seconds = time_calls(gpu, f32_call);
    const bool q8 = q8_bytes > 0 && kernels::cuda::has_q8_lanes(type);
    const kernels::MatmulOut out{w, y};
    const auto q8_call = [&] { gpu.matmuls(&out, 1, {x_f32, *x_q8_dev}, 1); };
    const double q8_seconds = q8 ? time_calls(gpu, q8_call) : 0.0;
    gpu.release(*w_dev);
    if (seconds <= 0 || q8_seconds < 0) {
      ++failures;
      continue;
    }
    const double moved = static_cast<double>(bytes.size()) + (cols + rows) * sizeof(float);
    const double gbs = moved / seconds / 1e9;
    std::printf("%-8s %10.1f | %10.1f %9.0f %6.0f%% %6.0f%% |", tensor::dtype_name(type).data(),
                moved / 1e6, seconds * 1e6, gbs, ceiling > 0 ? 100.0 * gbs / ceiling : 0.0,
                d.peak_gbs > 0 ? 100.0 * gbs / d.peak_gbs : 0.0);
    if (q8) {
      const double q8_moved = static_cast<double>(bytes.size()) + q8_bytes + rows * sizeof(float);
      const double q8_gbs = q8_moved / q8_seconds / 1e9;
      std::printf(" %10.1f %9.0f %6.0f%% %6.2fx\n", q8_seconds * 1e6, q8_gbs,
                  ceiling > 0 ? 100.0 * q8_gbs / ceiling : 0.0, seconds / q8_seconds);
    } else {
      std::printf(" %10s %9s %7s %7s\n", "-", "-", "-", "-");
    }
  }
  gpu.release(*x_dev);
  gpu.release(*x_q8_dev);
  gpu.release(*y_dev);
  return failures == 0 ? 0 : 1;
}
