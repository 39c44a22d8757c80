// kernels::cpu::decode_rate: the decode dot kernels timed on cache-resident rows, or through
// matmul() on a matrix far larger than any cache.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "tensor/quantize.h"
#include "util/aligned_buffer.h"

namespace kernels::cpu {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

double decode_rate(DType type, Residence where, util::ThreadPool& pool, Isa isa) {
  const DotKernel kernel = dot_kernel(type, isa);
  if (kernel.dot == nullptr) return 0;
  constexpr int64_t kCols = 2048;                     // a multiple of every block size
  constexpr size_t kCacheBytesPerThread = 160 << 10;  // in L2 on every AVX2-era core (256 KiB+)
  constexpr size_t kMemoryBytes = size_t{256} << 20;  // beyond any L3
  const size_t row_bytes = tensor::row_bytes(type, kCols);
  const int threads = pool.size();
  const int64_t n_rows = where == Residence::kCache
                             ? threads * std::max<int64_t>(4, kCacheBytesPerThread / row_bytes)
                             : static_cast<int64_t>(kMemoryBytes / row_bytes);

  // Real encoded rows (random values), so scales are normal numbers as in a model file; a type
  // with no encoder gets a fixed byte pattern (0x31 0x31 is a normal f16).
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(kCols);
  for (float& v : values) v = uniform(rng);
  util::AlignedBuffer weights(row_bytes * n_rows);
  util::AlignedBuffer activations(tensor::row_bytes(kernel.partner, kCols));
  util::AlignedBuffer scratch(matmul_scratch_bytes(1, kCols, threads));
  if (!weights.ok() || !activations.ok() || !scratch.ok()) return 0;
  auto* w = weights.as<uint8_t>();
  if (!tensor::quantize_row(type, values.data(), w, kCols).ok()) std::memset(w, 0x31, row_bytes);
  for (int64_t r = 1; r < n_rows; ++r) std::memcpy(w + r * row_bytes, w, row_bytes);
  kernel.to_partner(values.data(), activations.data(), kCols);

  double best = 0;
  if (where == Residence::kMemory) {
    // Decode's own path: matmul() of one token, rows spread over the pool; best of 3 passes.
    const Matrix m{w, type, kCols, n_rows, row_bytes};
    std::vector<float> y(static_cast<size_t>(n_rows));
    for (int pass = 0; pass < 3; ++pass) {
      const auto start = Clock::now();
      matmul(m, values.data(), y.data(), 1, pool, scratch.data(), isa);
      best = std::max(best, static_cast<double>(row_bytes * n_rows) / seconds_since(start));
    }
    return best;
  }
  // In cache: each thread loops over its own rows for ~10 ms; the rate is the sum of the
  // threads' rates (no hand-offs between passes, so this is the kernel alone).
  const int64_t rows_per_thread = n_rows / threads;
  for (int round = 0; round < 3; ++round) {
    std::vector<double> rates(threads, 0.0);
    pool.parallel_for(threads, [&](int task, int) {
      const uint8_t* rows = w + task * rows_per_thread * row_bytes;
      float out = 0;  // an indirect call: the compiler cannot drop it
      size_t bytes = 0;
      const auto start = Clock::now();
      double seconds = 0;
      do {
        for (int64_t r = 0; r < rows_per_thread; ++r)
          kernel.dot(kCols, rows + r * row_bytes, activations.data(), 0, 1, &out, 0);
        bytes += rows_per_thread * row_bytes;
        seconds = seconds_since(start);
      } while (seconds < 0.01);
      rates[task] = static_cast<double>(bytes) / seconds;
    });
    double sum = 0;
    for (double r : rates) sum += r;
    best = std::max(best, sum);
  }
  return best;
}

}  // namespace kernels::cpu
