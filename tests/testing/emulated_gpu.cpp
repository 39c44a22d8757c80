// testing_util::EmulatedGpu (emulated_gpu.h): the CPU backend behind a device's memory contract.
#include "testing/emulated_gpu.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "kernels/act_q8.h"
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
  ++copies_.blocking_uploads;
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
  ++copies_.blocking_downloads;
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
  for (size_t i = 0; i < current_.steps.size(); ++i)
    run_now(current_.signatures[i], current_.steps[i], current_.launches[i]);
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
  for (size_t i = 0; i < r.steps.size(); ++i) run_now(r.signatures[i], r.steps[i], r.launches[i]);
}

void EmulatedGpu::release_recording(int id) {
  if (id >= 0 && id < static_cast<int>(recordings_.size())) recordings_[id] = {};
}

void EmulatedGpu::issue(std::string signature, std::function<void()> run, int launches) {
  switch (mode_) {
    case Mode::kRecord:
      current_.signatures.push_back(std::move(signature));
      current_.steps.push_back(std::move(run));
      current_.launches.push_back(launches);
      return;
    case Mode::kReplay:
      current_.signatures.push_back(std::move(signature));
      return;
    case Mode::kRun:
      run_now(signature, run, launches);
      return;
  }
}

void EmulatedGpu::run_now(const std::string& signature, const std::function<void()>& run,
                          int launches) {
  flush_copies();
  run();
  ++ops_run_;
  const std::string name = signature.substr(0, signature.find(' '));
  if (name == "upload_async") {
    ++copies_.async_uploads;
  } else if (name == "download_async") {
    ++copies_.async_downloads;
  } else if (name == "lora") {  // two kernels per adapter: A · x, then B · h added
    for (int i = 0; i < launches / 2; ++i) {
      launches_.push_back("lora.a");
      launches_.push_back("lora.b");
    }
  } else if (launches == 2) {  // attention split over the context
    launches_.push_back(name + ".chunks");
    launches_.push_back(name + ".combine");
  } else {
    launches_.push_back(name);
  }
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
  issue(
      fmt::format("attention {} {} {} {} {} {} {} {} {}", b.n_tokens, b.n_head, b.head_dim,
                  static_cast<const void*>(b.q), static_cast<void*>(b.out),
                  static_cast<const void*>(b.pos), static_cast<const void*>(b.kv), b.out_q8,
                  static_cast<void*>(b.partials)),
      [=, this] {
        const int64_t width = static_cast<int64_t>(b.n_head) * b.head_dim;
        const size_t qo = floats(b.n_tokens * width);
        check("attention", "q", b.q, qo);
        check("attention", "out", b.out, qo);
        check("attention", "the positions", b.pos, b.n_tokens * sizeof(int32_t));
        check("attention", "the span array", b.kv, b.n_tokens * sizeof(void*));
        check("attention", "the partial states", b.partials,
              floats(static_cast<int64_t>(b.n_tokens) * b.n_head * kernels::kAttnMaxSplits *
                     (b.head_dim + 2)),
              true);
        if (b.attend_from != nullptr)
          check("attention", "the image starts", b.attend_from, b.n_tokens * sizeof(int32_t));
        if (b.attend_until != nullptr)
          check("attention", "the image ends", b.attend_until, b.n_tokens * sizeof(int32_t));
        if (inside(device_, b.kv, b.n_tokens * sizeof(void*))) check_spans(b);
        if (!error_.empty()) return;
        cpu_.attention(b);
        write_q8("attention", b.out, b.out_q8, width, b.n_tokens);
      },
      b.partials != nullptr ? 2 : 1);
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

// --- Fused ops: the pointers a GPU kernel would read, the 8-bit activations, the CPU's result ----

void EmulatedGpu::check_matrix(const char* op, const kernels::Matrix& w) {
  check(op, "the weights", w.data, w.n_rows * w.row_bytes);
}

void EmulatedGpu::check_q8(const char* op, const float* x, const void* q8, int64_t n_cols,
                           int n_rows) {
  if (q8 == nullptr) return;
  if (!kernels::act_q8_fits(n_cols)) {
    return fail(
        fmt::format("{}: 8-bit activations for rows of {} (not a multiple of 32)", op, n_cols));
  }
  const size_t bytes = kernels::act_q8_row_bytes(n_cols) * n_rows;
  check(op, "the 8-bit activations", q8, bytes);
  if (!inside(device_, q8, bytes)) return;
  std::vector<uint8_t> want(bytes);
  kernels::quantize_act_rows(x, n_cols, n_rows, want.data());
  for (int r = 0; r < n_rows; ++r) {
    const size_t row = kernels::act_q8_row_bytes(n_cols), used = n_cols + n_cols / 32 * 8;
    if (std::memcmp(want.data() + r * row, static_cast<const uint8_t*>(q8) + r * row, used) != 0) {
      return fail(
          fmt::format("{}: the 8-bit activations of row {} are not those of its f32 values "
                      "(stale, or written for other rows)",
                      op, r));
    }
  }
}

void EmulatedGpu::write_q8(const char* op, const float* y, void* q8, int64_t n_cols, int n_rows) {
  if (q8 == nullptr) return;
  if (!kernels::act_q8_fits(n_cols)) {
    return fail(fmt::format("{}: a destination for 8-bit activations of rows of {}", op, n_cols));
  }
  check(op, "the 8-bit destination", q8, kernels::act_q8_row_bytes(n_cols) * n_rows);
  if (error_.empty()) kernels::quantize_act_rows(y, n_cols, n_rows, q8);
}

void EmulatedGpu::matmuls(const kernels::MatmulOut* outs, int n, kernels::Activations x,
                          int n_tokens) {
  std::string signature =
      fmt::format("matmuls {} {} {} {}", static_cast<const void*>(x.f32), x.q8, n_tokens, n);
  std::vector<kernels::MatmulOut> list(outs, outs + n);
  for (const auto& o : list) signature += fmt::format(" {} {}", o.w.data, static_cast<void*>(o.y));
  issue(std::move(signature), [=, this] {
    for (const auto& o : list) {
      check_matrix("matmuls", o.w);
      check("matmuls", "x", x.f32, floats(n_tokens * o.w.n_cols));
      check("matmuls", "y", o.y, floats(n_tokens * o.w.n_rows));
    }
    if (!list.empty()) check_q8("matmuls", x.f32, x.q8, list[0].w.n_cols, n_tokens);
    if (error_.empty()) cpu_.matmuls(list.data(), n, x, n_tokens);
  });
}

void EmulatedGpu::lora(const kernels::LoraDelta& a) {
  std::vector<kernels::LoraTerm> terms(a.terms, a.terms + a.n_terms);
  std::string signature = fmt::format("lora {} {} {} {}", static_cast<const void*>(a.x),
                                      static_cast<void*>(a.y), a.n_tokens, a.n_terms);
  for (const auto& t : terms)
    signature += fmt::format(" {} {}", static_cast<const void*>(t.a), t.rank);
  issue(
      std::move(signature),
      [=, this] {
        check("lora", "x", a.x, floats(a.n_tokens * a.n_cols));
        check("lora", "y", a.y, floats(a.n_tokens * a.n_rows));
        for (const auto& t : terms) {
          check("lora", "A", t.a, floats(t.rank * a.n_cols));
          check("lora", "B", t.b, floats(t.rank * a.n_rows));
          check("lora", "the token scales", t.scale, floats(a.n_tokens));
          check("lora", "the scratch", a.scratch, floats(a.n_tokens * t.rank));
        }
        if (!error_.empty()) return;
        kernels::LoraDelta d = a;
        d.terms = terms.data();
        cpu_.lora(d);
      },
      2 * a.n_terms);
}

void EmulatedGpu::matmul_glu(const kernels::GluMatmul& a) {
  issue(fmt::format("matmul_glu {} {} {} {} {} {} {}", a.gate.data, a.up.data,
                    static_cast<const void*>(a.up_rows), static_cast<const void*>(a.x.f32), a.x.q8,
                    static_cast<void*>(a.out), a.n_tokens),
        [=, this] {
          const int64_t n = a.gate.n_rows;
          check_matrix("matmul_glu", a.gate);
          if (a.up.data != nullptr) check_matrix("matmul_glu", a.up);
          if (a.up.data == nullptr)
            check("matmul_glu", "the up rows", a.up_rows, strided(n, a.n_tokens, a.up_stride));
          check("matmul_glu", "x", a.x.f32, floats(a.n_tokens * a.gate.n_cols));
          check("matmul_glu", "out", a.out, floats(a.n_tokens * n));
          check("matmul_glu", "the scratch", a.scratch, floats(a.n_tokens * n));
          check_q8("matmul_glu", a.x.f32, a.x.q8, a.gate.n_cols, a.n_tokens);
          if (!error_.empty()) return;
          cpu_.matmul_glu(a);
          write_q8("matmul_glu", a.out, a.out_q8, n, a.n_tokens);
        });
}

void EmulatedGpu::residual_norm(const kernels::ResidualNorm& a) {
  std::string signature = fmt::format("residual_norm {} {} {} {} {} {}", static_cast<void*>(a.x),
                                      static_cast<void*>(a.branch[0]),
                                      static_cast<void*>(a.branch[1]), a.n, a.n_rows, a.n_out);
  for (int j = 0; j < a.n_out; ++j)
    signature += fmt::format(" {} {}", static_cast<void*>(a.out[j].y), a.out[j].y_q8);
  issue(std::move(signature), [=, this] {
    const size_t rows = floats(a.n * a.n_rows);
    check("residual_norm", "x", a.x, rows);
    check("residual_norm", "branch 0", a.branch[0], rows, true);
    check("residual_norm", "branch 1", a.branch[1], rows, true);
    for (int i = 0; i < 2; ++i)
      check("residual_norm", "a branch norm", a.branch_norm[i], floats(a.n), true);
    check("residual_norm", "the sum's norm", a.sum_norm, floats(a.n), true);
    for (int j = 0; j < a.n_out; ++j) {
      check("residual_norm", "an output's norm", a.out[j].w, floats(a.n), true);
      check("residual_norm", "an output's factors", a.out[j].mul, floats(a.n), true);
      check("residual_norm", "an output", a.out[j].y, rows, true);
    }
    if (!error_.empty()) return;
    cpu_.residual_norm(a);
    for (int j = 0; j < a.n_out; ++j) {
      write_q8("residual_norm", a.out[j].y != nullptr ? a.out[j].y : a.x, a.out[j].y_q8, a.n,
               a.n_rows);
    }
  });
}

void EmulatedGpu::attn_prep(const kernels::AttnPrep& a) {
  issue(fmt::format("attn_prep {} {} {} {} {} {} {}", static_cast<void*>(a.q),
                    static_cast<void*>(a.k), static_cast<void*>(a.v),
                    static_cast<const void*>(a.dst), static_cast<const void*>(a.pos), a.n_tokens,
                    static_cast<const void*>(a.rope.inv_freq)),
        [=, this] {
          const int64_t T = a.n_tokens, kv = static_cast<int64_t>(a.n_head_kv) * a.head_dim;
          check("attn_prep", "q", a.q, floats(T * a.n_head * a.head_dim));
          check("attn_prep", "the q norm", a.q_norm, floats(a.head_dim), true);
          check("attn_prep", "the positions", a.pos, T * sizeof(int32_t));
          check("attn_prep", "the frequencies", a.rope.inv_freq, floats(a.rope.n_rot / 2));
          if (a.k != nullptr) {
            check("attn_prep", "k", a.k, floats(T * kv));
            check("attn_prep", "v", a.v, floats(T * kv));
            check("attn_prep", "the k norm", a.k_norm, floats(a.head_dim), true);
            check("attn_prep", "the destinations", a.dst, T * sizeof(kernels::KvWrite));
            if (inside(device_, a.dst, T * sizeof(kernels::KvWrite)))
              check_writes(a.dst, a.n_tokens, tensor::row_bytes(a.k_type, kv),
                           tensor::row_bytes(a.v_type, kv));
          }
          if (error_.empty()) cpu_.attn_prep(a);
        });
}

void EmulatedGpu::moe_glu(const kernels::MoeGlu& a) {
  issue(fmt::format("moe_glu {} {} {} {} {} {} {}", static_cast<const void*>(a.router_logits),
                    a.gate_up.data, a.gate.data, static_cast<const void*>(a.x.f32), a.x.q8,
                    static_cast<void*>(a.h), a.n_tokens),
        [=, this] {
          const int64_t T = a.n_tokens, tk = T * a.k;
          const bool fused = a.gate_up.data != nullptr;
          const int64_t C = fused ? a.gate_up.n_cols : a.gate.n_cols;
          check("moe_glu", "the router logits", a.router_logits, floats(T * a.n_expert));
          check("moe_glu", "the expert scales", a.expert_scale, floats(a.n_expert), true);
          check("moe_glu", "the ids", a.ids, tk * sizeof(int32_t));
          check("moe_glu", "the weights", a.weights, floats(tk));
          if (fused) {
            check_matrix("moe_glu", a.gate_up);
          } else {
            check_matrix("moe_glu", a.gate);
            check_matrix("moe_glu", a.up);
          }
          check("moe_glu", "x", a.x.f32, floats(T * C));
          check("moe_glu", "h", a.h, floats(tk * a.n_ff));
          check("moe_glu", "the scratch", a.scratch_in, floats(T * C));
          check("moe_glu", "the scratch", a.scratch_gu, floats(T * 2 * a.n_ff));
          check("moe_glu", "the scratch", a.scratch_h, floats(T * a.n_ff));
          check_q8("moe_glu", a.x.f32, a.x.q8, C, a.n_tokens);
          if (!error_.empty()) return;
          cpu_.moe_glu(a);
          write_q8("moe_glu", a.h, a.h_q8, a.n_ff, static_cast<int>(tk));
        });
}

void EmulatedGpu::moe_down(const kernels::MoeDown& a) {
  issue(
      fmt::format("moe_down {} {} {} {} {} {}", a.down.data, static_cast<const void*>(a.ids),
                  static_cast<const void*>(a.h.f32), a.h.q8, static_cast<void*>(a.out), a.n_tokens),
      [=, this] {
        const int64_t T = a.n_tokens, tk = T * a.k, F = a.down.n_cols;
        const int64_t H = a.down.n_rows / a.n_expert;
        check_matrix("moe_down", a.down);
        check("moe_down", "the ids", a.ids, tk * sizeof(int32_t));
        check("moe_down", "the weights", a.weights, floats(tk));
        check("moe_down", "h", a.h.f32, floats(tk * F));
        check("moe_down", "out", a.out, floats(T * H));
        check("moe_down", "the scratch", a.scratch_in, floats(T * F));
        check("moe_down", "the scratch", a.scratch_out, floats(T * H));
        check_q8("moe_down", a.h.f32, a.h.q8, F, static_cast<int>(tk));
        if (error_.empty()) cpu_.moe_down(a);
      });
}

void EmulatedGpu::top_k(const float* x, int64_t n, int n_rows, int k, int32_t* ids, float* values) {
  issue(fmt::format("top_k {} {} {} {} {} {}", static_cast<const void*>(x), n, n_rows, k,
                    static_cast<void*>(ids), static_cast<void*>(values)),
        [=, this] {
          check("top_k", "x", x, floats(n * n_rows));
          check("top_k", "the ids", ids, static_cast<size_t>(n_rows) * k * sizeof(int32_t));
          check("top_k", "the values", values, floats(static_cast<int64_t>(n_rows) * k));
          if (error_.empty()) cpu_.top_k(x, n, n_rows, k, ids, values);
        });
}

void EmulatedGpu::scatter(const uint8_t* src, const kernels::ScatterPiece* pieces,
                          const int32_t* n_pieces, int max_pieces) {
  issue(
      fmt::format("scatter {} {} {} {}", static_cast<const void*>(src),
                  static_cast<const void*>(pieces), static_cast<const void*>(n_pieces), max_pieces),
      [=, this] {
        check("scatter", "the piece count", n_pieces, sizeof(int32_t));
        check("scatter", "the pieces", pieces, max_pieces * sizeof(kernels::ScatterPiece));
        if (!error_.empty()) return;
        if (*n_pieces < 0 || *n_pieces > max_pieces)
          return fail(fmt::format("scatter: {} pieces (0 to {})", *n_pieces, max_pieces));
        for (int i = 0; i < *n_pieces; ++i) {
          check("scatter", "a piece's source", src + pieces[i].offset, pieces[i].bytes);
          check("scatter", "a piece's destination", pieces[i].dst, pieces[i].bytes);
        }
        if (error_.empty()) cpu_.scatter(src, pieces, n_pieces, max_pieces);
      });
}

void EmulatedGpu::download_async(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (!inside(host_, host_dst, bytes))
    fail(fmt::format("download_async to {}, which allocate_host() did not return", host_dst));
  issue(fmt::format("download_async {} {} {}", host_dst, src, bytes), [=, this] {
    check("download_async", "the source", src, bytes);
    if (error_.empty()) std::memcpy(host_dst, src, bytes);
  });
}

}  // namespace testing_util
