// testing_util::EmulatedGpu (emulated_gpu.h): the CPU backend behind a device's memory contract.
#include "testing/emulated_gpu.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "tensor/dtype.h"

namespace testing_util {
namespace {

// Device memory starts as 0xFF bytes (NaN as f32), as cudaMalloc's memory starts as whatever was
// there: a read of something never written shows up in the results.
constexpr int kPoison = 0xFF;

size_t floats(int64_t n) {
  return static_cast<size_t>(n) * sizeof(float);
}

// Bytes a strided [n_rows][n] view spans.
size_t strided(int64_t n, int64_t n_rows, int64_t stride) {
  return n_rows > 0 ? floats((n_rows - 1) * stride + n) : 0;
}

}  // namespace

EmulatedGpu::EmulatedGpu(util::ThreadPool& pool, int max_tokens, int64_t max_cols)
    : cpu_(pool, max_tokens, max_cols) {}

EmulatedGpu::EmulatedGpu(int threads, int max_tokens, int64_t max_cols)
    : own_pool_(std::make_unique<util::ThreadPool>(threads)),
      cpu_(*own_pool_, max_tokens, max_cols) {}

EmulatedGpu::~EmulatedGpu() {
  for (auto& [begin, bytes] : device_) std::free(reinterpret_cast<void*>(begin));
  for (auto& [begin, bytes] : host_) std::free(reinterpret_cast<void*>(begin));
}

util::Result<void*> EmulatedGpu::allocate(size_t bytes) {
  void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (p == nullptr) return util::errorf("emulated-gpu: out of memory ({} bytes)", bytes);
  std::memset(p, kPoison, bytes);
  device_[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}

void EmulatedGpu::release(void* ptr) {
  if (ptr == nullptr) return;
  if (device_.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) {
    fail(fmt::format("release of {} which allocate() did not return", ptr));
    return;
  }
  std::free(ptr);
}

util::Result<void*> EmulatedGpu::allocate_host(size_t bytes) {
  void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  if (p == nullptr) return util::errorf("emulated-gpu: out of host memory ({} bytes)", bytes);
  host_[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}

void EmulatedGpu::release_host(void* ptr) {
  if (ptr == nullptr) return;
  if (host_.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) {
    fail(fmt::format("release_host of {} which allocate_host() did not return", ptr));
    return;
  }
  std::free(ptr);
}

util::Status EmulatedGpu::upload(void* dst, const void* host_src, size_t bytes) {
  if (mode_ != Mode::kRun) fail("upload (a synchronous copy) inside a recorded or replayed pass");
  flush_copies();
  if (!inside(device_, dst, bytes)) {
    fail(fmt::format("upload of {} bytes to {}, which is not device memory", bytes, dst));
    return util::errorf("emulated-gpu: upload to host memory");
  }
  std::memcpy(dst, host_src, bytes);
  return {};
}

void EmulatedGpu::upload_async(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  if (!inside(host_, host_src, bytes))
    fail(fmt::format("upload_async from {}, which allocate_host() did not return", host_src));
  if (!inside(device_, dst, bytes))
    fail(fmt::format("upload_async of {} bytes to {}, which is not device memory", bytes, dst));
  const Copy c{dst, host_src, bytes};
  issue(fmt::format("upload_async {} {} {}", dst, host_src, bytes),
        [this, c] { pending_.push_back(c); });
}

util::Status EmulatedGpu::download(void* host_dst, const void* src, size_t bytes) {
  if (mode_ != Mode::kRun) fail("download (a synchronous copy) inside a recorded or replayed pass");
  flush_copies();
  if (!inside(device_, src, bytes)) {
    fail(fmt::format("download of {} bytes from {}, which is not device memory", bytes, src));
    return util::errorf("emulated-gpu: download from host memory");
  }
  std::memcpy(host_dst, src, bytes);
  return {};
}

util::Status EmulatedGpu::synchronize() {
  flush_copies();
  if (error_.empty()) return {};
  return util::Error(std::exchange(error_, {}));
}

void EmulatedGpu::begin_record() {
  if (mode_ != Mode::kRun) fail("begin_record inside a recorded or replayed pass");
  mode_ = Mode::kRecord;
  current_ = {};
}

util::Result<int> EmulatedGpu::end_record() {
  if (mode_ != Mode::kRecord) return util::errorf("emulated-gpu: end_record without begin_record");
  mode_ = Mode::kRun;
  for (const auto& step : current_.steps) run_now(step);
  recordings_.push_back(std::move(current_));
  current_ = {};
  return static_cast<int>(recordings_.size()) - 1;
}

void EmulatedGpu::begin_replay() {
  if (mode_ != Mode::kRun) fail("begin_replay inside a recorded or replayed pass");
  mode_ = Mode::kReplay;
  current_ = {};
}

void EmulatedGpu::replay(int id) {
  if (mode_ != Mode::kReplay) fail("replay without begin_replay");
  mode_ = Mode::kRun;
  if (id < 0 || id >= static_cast<int>(recordings_.size()) || recordings_[id].steps.empty()) {
    fail(fmt::format("replay of recording {}, which does not exist", id));
    return;
  }
  const Recording& r = recordings_[id];
  // The promise of ops.h: the dropped calls are exactly the recorded ones.
  if (current_.signatures != r.signatures) {
    size_t i = 0;
    while (i < r.signatures.size() && i < current_.signatures.size() &&
           r.signatures[i] == current_.signatures[i])
      ++i;
    fail(fmt::format("replay {}: call {} differs from the recording (recorded: {}; now: {})", id, i,
                     i < r.signatures.size() ? r.signatures[i] : "nothing",
                     i < current_.signatures.size() ? current_.signatures[i] : "nothing"));
  }
  current_ = {};
  ++replays_;
  for (const auto& step : r.steps) run_now(step);
}

void EmulatedGpu::release_recording(int id) {
  if (id >= 0 && id < static_cast<int>(recordings_.size())) recordings_[id] = {};
}

void EmulatedGpu::issue(std::string signature, std::function<void()> run) {
  switch (mode_) {
    case Mode::kRecord:
      current_.signatures.push_back(std::move(signature));
      current_.steps.push_back(std::move(run));
      return;
    case Mode::kReplay:
      current_.signatures.push_back(std::move(signature));
      return;
    case Mode::kRun:
      run_now(run);
      return;
  }
}

void EmulatedGpu::run_now(const std::function<void()>& run) {
  flush_copies();
  run();
  ++ops_run_;
}

void EmulatedGpu::flush_copies() {
  for (const Copy& c : pending_) std::memcpy(c.dst, c.src, c.bytes);
  pending_.clear();
}

void EmulatedGpu::fail(std::string message) {
  if (error_.empty()) error_ = "emulated-gpu: " + std::move(message);
}

bool EmulatedGpu::inside(const std::map<uintptr_t, size_t>& regions, const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = regions.upper_bound(a);
  if (it == regions.begin()) return false;
  --it;
  return a + bytes <= it->first + it->second;
}

void EmulatedGpu::check(const char* op, const char* what, const void* p, size_t bytes,
                        bool may_be_null) {
  if (p == nullptr && (may_be_null || bytes == 0)) return;
  if (!inside(device_, p, bytes))
    fail(fmt::format("{}: {} at {} ({} bytes) is not device memory", op, what, p, bytes));
}

void EmulatedGpu::check_spans(const kernels::AttentionBatch& b) {
  for (int t = 0; t < b.n_tokens; ++t) {
    const kernels::KvSpan* s = b.kv[t];
    check("attention", "a KV span", s, sizeof(kernels::KvSpan));
    if (!inside(device_, s, sizeof(kernels::KvSpan))) return;
    if (s->n_cells == 0) continue;
    const int n_blocks = (s->n_cells + s->cells_per_block - 1) / s->cells_per_block;
    check("attention", "the K block table", s->k_blocks, n_blocks * sizeof(void*));
    check("attention", "the V block table", s->v_blocks, n_blocks * sizeof(void*));
    check("attention", "the cell positions", s->cell_pos, s->n_cells * sizeof(int32_t));
    if (!inside(device_, s->k_blocks, n_blocks * sizeof(void*)) ||
        !inside(device_, s->v_blocks, n_blocks * sizeof(void*)))
      return;
    for (int i = 0; i < n_blocks; ++i) {
      check("attention", "a K block", s->k_blocks[i], s->cells_per_block * s->k_row_bytes);
      check("attention", "a V block", s->v_blocks[i], s->cells_per_block * s->v_row_bytes);
    }
  }
}

void EmulatedGpu::check_writes(const kernels::KvWrite* dst, int n_tokens, size_t k_row,
                               size_t v_row) {
  for (int t = 0; t < n_tokens; ++t) {
    check("store_kv", "a K row", dst[t].k, k_row);
    check("store_kv", "a V row", dst[t].v, v_row);
  }
}

void EmulatedGpu::matmul(const kernels::Matrix& w, const float* x, float* y, int n_tokens) {
  issue(fmt::format("matmul {} {} {} {}", w.data, static_cast<const void*>(x),
                    static_cast<void*>(y), n_tokens),
        [=, this] {
          check("matmul", "the weights", w.data, w.n_rows * w.row_bytes);
          check("matmul", "x", x, floats(n_tokens * w.n_cols));
          check("matmul", "y", y, floats(n_tokens * w.n_rows));
          cpu_.matmul(w, x, y, n_tokens);
        });
}

void EmulatedGpu::get_rows(const kernels::Matrix& table, const int32_t* ids, int n, float scale,
                           float* out) {
  issue(fmt::format("get_rows {} {} {} {} {}", table.data, static_cast<const void*>(ids), n, scale,
                    static_cast<void*>(out)),
        [=, this] {
          check("get_rows", "the table", table.data, table.n_rows * table.row_bytes);
          check("get_rows", "the ids", ids, n * sizeof(int32_t));
          check("get_rows", "out", out, floats(n * table.n_cols));
          cpu_.get_rows(table, ids, n, scale, out);
        });
}

void EmulatedGpu::rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
                          float eps) {
  issue(fmt::format("rmsnorm {} {} {} {} {}", static_cast<const void*>(x),
                    static_cast<const void*>(w), static_cast<void*>(y), n, n_rows),
        [=, this] {
          check("rmsnorm", "x", x, floats(n * n_rows));
          check("rmsnorm", "the weights", w, floats(n), true);
          check("rmsnorm", "y", y, floats(n * n_rows));
          cpu_.rmsnorm(x, w, y, n, n_rows, eps);
        });
}

void EmulatedGpu::rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
                       const kernels::RopeParams& p) {
  issue(fmt::format("rope {} {} {} {} {} {}", static_cast<void*>(x), n_tokens, n_head, head_dim,
                    static_cast<const void*>(pos), static_cast<const void*>(p.inv_freq)),
        [=, this] {
          check("rope", "x", x, floats(static_cast<int64_t>(n_tokens) * n_head * head_dim));
          check("rope", "the positions", pos, n_tokens * sizeof(int32_t));
          check("rope", "the frequencies", p.inv_freq, floats(p.n_rot / 2));
          cpu_.rope(x, n_tokens, n_head, head_dim, pos, p);
        });
}

void EmulatedGpu::attention(const kernels::AttentionBatch& b) {
  issue(fmt::format("attention {} {} {} {} {} {} {}", b.n_tokens, b.n_head, b.head_dim,
                    static_cast<const void*>(b.q), static_cast<void*>(b.out),
                    static_cast<const void*>(b.pos), static_cast<const void*>(b.kv)),
        [=, this] {
          const size_t qo = floats(static_cast<int64_t>(b.n_tokens) * b.n_head * b.head_dim);
          check("attention", "q", b.q, qo);
          check("attention", "out", b.out, qo);
          check("attention", "the positions", b.pos, b.n_tokens * sizeof(int32_t));
          check("attention", "the span array", b.kv, b.n_tokens * sizeof(void*));
          if (b.attend_until != nullptr)
            check("attention", "the image ends", b.attend_until, b.n_tokens * sizeof(int32_t));
          if (inside(device_, b.kv, b.n_tokens * sizeof(void*))) check_spans(b);
          if (error_.empty()) cpu_.attention(b);
        });
}

void EmulatedGpu::store_kv(kernels::DType k_type, kernels::DType v_type, int kv_dim, const float* k,
                           const float* v, const kernels::KvWrite* dst, int n_tokens) {
  issue(fmt::format("store_kv {} {} {} {} {} {}", kv_dim, static_cast<const void*>(k),
                    static_cast<const void*>(v), static_cast<const void*>(dst), n_tokens,
                    static_cast<int>(k_type) * 100 + static_cast<int>(v_type)),
        [=, this] {
          check("store_kv", "k", k, floats(static_cast<int64_t>(n_tokens) * kv_dim));
          check("store_kv", "v", v, floats(static_cast<int64_t>(n_tokens) * kv_dim));
          check("store_kv", "the destinations", dst, n_tokens * sizeof(kernels::KvWrite));
          if (inside(device_, dst, n_tokens * sizeof(kernels::KvWrite)))
            check_writes(dst, n_tokens, tensor::row_bytes(k_type, kv_dim),
                         tensor::row_bytes(v_type, kv_dim));
          if (error_.empty()) cpu_.store_kv(k_type, v_type, kv_dim, k, v, dst, n_tokens);
        });
}

// The elementwise ops: y and x over n values.
#define HR_EMULATED_UNARY(op, call)                                                          \
  issue(fmt::format(#op " {} {} {}", static_cast<void*>(y), static_cast<const void*>(x), n), \
        [=, this] {                                                                          \
          check(#op, "y", y, floats(n));                                                     \
          check(#op, "x", x, floats(n));                                                     \
          call;                                                                              \
        })

void EmulatedGpu::add(float* y, const float* x, int64_t n) {
  HR_EMULATED_UNARY(add, cpu_.add(y, x, n));
}
void EmulatedGpu::mul(float* y, const float* x, int64_t n) {
  HR_EMULATED_UNARY(mul, cpu_.mul(y, x, n));
}
void EmulatedGpu::copy(float* y, const float* x, int64_t n) {
  HR_EMULATED_UNARY(copy, cpu_.copy(y, x, n));
}
#undef HR_EMULATED_UNARY

void EmulatedGpu::scale(float* y, float s, int64_t n) {
  issue(fmt::format("scale {} {} {}", static_cast<void*>(y), s, n), [=, this] {
    check("scale", "y", y, floats(n));
    cpu_.scale(y, s, n);
  });
}

void EmulatedGpu::softcap(float* y, float cap, int64_t n) {
  issue(fmt::format("softcap {} {} {}", static_cast<void*>(y), cap, n), [=, this] {
    check("softcap", "y", y, floats(n));
    cpu_.softcap(y, cap, n);
  });
}

void EmulatedGpu::clamp(float* y, float lo, float hi, int64_t n) {
  issue(fmt::format("clamp {} {} {} {}", static_cast<void*>(y), lo, hi, n), [=, this] {
    check("clamp", "y", y, floats(n));
    cpu_.clamp(y, lo, hi, n);
  });
}

void EmulatedGpu::silu_mul(const float* gate, const float* up, float* out, int64_t n,
                           int64_t n_rows, int64_t stride) {
  issue(fmt::format("silu_mul {} {} {} {} {} {}", static_cast<const void*>(gate),
                    static_cast<const void*>(up), static_cast<void*>(out), n, n_rows, stride),
        [=, this] {
          check("silu_mul", "gate", gate, strided(n, n_rows, stride));
          check("silu_mul", "up", up, strided(n, n_rows, stride));
          check("silu_mul", "out", out, floats(n * n_rows));
          cpu_.silu_mul(gate, up, out, n, n_rows, stride);
        });
}

void EmulatedGpu::gelu_mul(const float* gate, const float* up, float* out, int64_t n,
                           int64_t n_rows, int64_t stride) {
  issue(fmt::format("gelu_mul {} {} {} {} {} {}", static_cast<const void*>(gate),
                    static_cast<const void*>(up), static_cast<void*>(out), n, n_rows, stride),
        [=, this] {
          check("gelu_mul", "gate", gate, strided(n, n_rows, stride));
          check("gelu_mul", "up", up, strided(n, n_rows, stride));
          check("gelu_mul", "out", out, floats(n * n_rows));
          cpu_.gelu_mul(gate, up, out, n, n_rows, stride);
        });
}

void EmulatedGpu::moe_route(const float* logits, int n_tokens, int n_expert, int k,
                            const float* expert_scale, int32_t* ids, float* weights) {
  issue(fmt::format("moe_route {} {} {} {} {} {} {}", static_cast<const void*>(logits), n_tokens,
                    n_expert, k, static_cast<const void*>(expert_scale), static_cast<void*>(ids),
                    static_cast<void*>(weights)),
        [=, this] {
          check("moe_route", "the logits", logits,
                floats(static_cast<int64_t>(n_tokens) * n_expert));
          check("moe_route", "the expert scales", expert_scale, floats(n_expert), true);
          check("moe_route", "the ids", ids, n_tokens * k * sizeof(int32_t));
          check("moe_route", "the weights", weights, floats(static_cast<int64_t>(n_tokens) * k));
          cpu_.moe_route(logits, n_tokens, n_expert, k, expert_scale, ids, weights);
        });
}

void EmulatedGpu::copy_rows(float* y, int64_t y_stride, const float* x, int64_t x_stride, int64_t n,
                            int64_t n_rows) {
  issue(fmt::format("copy_rows {} {} {} {} {} {}", static_cast<void*>(y), y_stride,
                    static_cast<const void*>(x), x_stride, n, n_rows),
        [=, this] {
          check("copy_rows", "y", y, strided(n, n_rows, y_stride));
          check("copy_rows", "x", x, strided(n, n_rows, x_stride));
          cpu_.copy_rows(y, y_stride, x, x_stride, n, n_rows);
        });
}

}  // namespace testing_util
