// kernels::cpu::matmul: activations converted once to the weight type's partner format, then
// threads over (chunk of weight rows × block of tokens) tasks calling the dot kernels.
#include "kernels/cpu/matmul.h"

#include <algorithm>

#include "kernels/cpu/dot.h"
#include "tensor/dequantize.h"

namespace kernels::cpu {
namespace {

constexpr size_t kAlign = 64;
size_t aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

// Tokens per task in prefill: their partner rows (~4 KiB each at 4096 columns) stay in L2 while
// every weight row of the task's chunk streams past once.
constexpr int kTokenBlock = 64;
// Tokens per pass over a task's weight rows (see matmul()): 16 partner rows are ~27 KiB at 1536
// columns, ~70 KiB at 4096. Measured on E2B-shaped prefill, 2 threads: Q4_K 290 -> 370 GOP/s,
// Q6_K 267 -> 316, Q8_0 within noise; 8 and 16 tokens were within noise of each other.
constexpr int kTokenSub = 16;

// Rows per task: enough tasks for dynamic balancing over the threads, but rows of one task
// adjacent so the weight stream stays sequential.
int64_t rows_per_task(int64_t n_rows, int n_threads, int n_token_blocks) {
  const int64_t wanted_tasks = std::max<int64_t>(1, int64_t{n_threads} * 8 / n_token_blocks);
  return std::clamp<int64_t>((n_rows + wanted_tasks - 1) / wanted_tasks, 1, 256);
}

}  // namespace

// Bytes of one activation row in the largest partner format (f32 rows are read in place).
size_t partner_row_bytes(int64_t cols) {
  const auto round_up = [&](int64_t block) { return (cols + block - 1) / block * block; };
  return static_cast<size_t>(std::max(tensor::row_bytes(DType::kQ8_1, round_up(32)),
                                      tensor::row_bytes(DType::kQ8_K, round_up(256))));
}

size_t matmul_scratch_bytes(int max_tokens, int64_t max_cols, int n_threads) {
  // Partner rows for the batch, then one f32 row per thread for the dequantize-a-row path.
  const size_t f32_row = aligned(static_cast<size_t>(max_cols) * sizeof(float));
  return aligned(static_cast<size_t>(max_tokens) * partner_row_bytes(max_cols)) +
         static_cast<size_t>(n_threads) * f32_row;
}

void matmul(const Matrix& w, const float* x, float* y, int n_tokens, util::ThreadPool& pool,
            void* scratch, Isa isa) {
  if (n_tokens <= 0 || w.n_rows == 0) return;
  DotKernel kernel = dot_kernel(w.type, isa);
  const bool dequantize_rows = kernel.dot == nullptr;
  if (dequantize_rows) kernel = dot_kernel(DType::kF32, isa);

  // Activations in the partner format (f32 needs no copy).
  auto* base = static_cast<uint8_t*>(scratch);
  const uint8_t* xp = reinterpret_cast<const uint8_t*>(x);
  size_t x_stride = static_cast<size_t>(w.n_cols) * sizeof(float);
  if (kernel.partner != DType::kF32) {
    x_stride = static_cast<size_t>(tensor::row_bytes(kernel.partner, w.n_cols));
    pool.parallel_for(n_tokens, [&](int t, int) {
      kernel.to_partner(x + static_cast<int64_t>(t) * w.n_cols, base + t * x_stride, w.n_cols);
    });
    xp = base;
  }
  float* row_scratch = reinterpret_cast<float*>(
      base + aligned(static_cast<size_t>(n_tokens) * partner_row_bytes(w.n_cols)));
  const size_t row_scratch_stride =
      aligned(static_cast<size_t>(w.n_cols) * sizeof(float)) / sizeof(float);

  const int n_token_blocks = (n_tokens + kTokenBlock - 1) / kTokenBlock;
  const int64_t chunk = rows_per_task(w.n_rows, pool.size(), n_token_blocks);
  const int64_t n_chunks = (w.n_rows + chunk - 1) / chunk;
  pool.parallel_for(static_cast<int>(n_chunks * n_token_blocks), [&](int task, int thread) {
    const int t0 = static_cast<int>(task / n_chunks) * kTokenBlock;
    const int nt = std::min(kTokenBlock, n_tokens - t0);
    const int64_t r0 = task % n_chunks * chunk, r1 = std::min(w.n_rows, r0 + chunk);
    // Rows inside token sub-blocks: a sub-block's partner rows stay in L1 while the chunk's weight
    // rows pass (the weight rows are far smaller than 8 tokens' partner rows, so this order moves
    // the least from L2). A dequantized row is converted once per task, so it takes all nt at once.
    const int sub = dequantize_rows ? nt : kTokenSub;
    for (int ts = 0; ts < nt; ts += sub) {
      const int ns = std::min(sub, nt - ts);
      const uint8_t* xt = xp + (t0 + ts) * x_stride;
      float* yt = y + static_cast<int64_t>(t0 + ts) * w.n_rows;
      int64_t r = r0;
      // Decode reads each weight row once, one row after another: a single sequential stream the
      // hardware prefetcher follows. Interleaving kDotRows rows (four streams) halved E2B Q8_0
      // decode on an AVX-512 EPYC (bench/RESULTS.md), so the rows kernel serves prefill only.
      if (kernel.dot_rows && !dequantize_rows && ns > 1) {
        for (; r + kDotRows <= r1; r += kDotRows) {
          kernel.dot_rows(w.n_cols, static_cast<const uint8_t*>(w.data) + r * w.row_bytes,
                          w.row_bytes, xt, x_stride, ns, yt + r, static_cast<size_t>(w.n_rows));
        }
      }
      for (; r < r1; ++r) {
        const void* row = static_cast<const uint8_t*>(w.data) + r * w.row_bytes;
        if (dequantize_rows) {
          float* f = row_scratch + thread * row_scratch_stride;
          // Types are checked when weights are bound (model::Binder): a bound row always converts.
          (void)tensor::dequantize_row(w.type, row, f, w.n_cols);
          row = f;
        }
        kernel.dot(w.n_cols, row, xt, x_stride, ns, yt + r, static_cast<size_t>(w.n_rows));
      }
    }
  });
}

}  // namespace kernels::cpu
