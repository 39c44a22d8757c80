// CudaBackend: device queries, memory helpers, argument checks and the error record around the
// kernel launchers of launch.h. Host code, compiled by the C++ compiler against the CUDA runtime.
#include "kernels/cuda/backend.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/cuda/launch.h"
#include "tensor/dtype.h"

namespace kernels::cuda {
namespace {

// The oldest architecture this binary carries code for (CMake passes the lowest entry of
// CMAKE_CUDA_ARCHITECTURES); older GPUs have no kernel image to run.
#ifndef HEADROOM_CUDA_MIN_ARCH
#define HEADROOM_CUDA_MIN_ARCH 75
#endif

std::string describe(cudaError_t err) {
  return fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
}

bool is_no_gpu(cudaError_t err) {
  return err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
         err == cudaErrorInitializationError || err == cudaErrorNotPermitted ||
         err == cudaErrorSystemDriverMismatch || err == cudaErrorCompatNotSupportedOnDevice;
}

// The matrix checks every decoding op shares: a type with a decoder, whole blocks, an aligned
// table. Empty string when fine.
std::string check_matrix(const char* op, const Matrix& w) {
  if (!detail::can_decode(w.type)) {
    return fmt::format(
        "cuda {}: {} weights have no CUDA decoder — requantize to a type such as Q4_K or Q8_0", op,
        tensor::dtype_name(w.type));
  }
  if (auto s = tensor::check_row_length(w.type, w.n_cols); !s)
    return fmt::format("cuda {}: {}", op, s.error().message());
  if (auto s = tensor::check_block_alignment(w.type, w.data); !s) {
    return fmt::format("cuda {}: {}", op, s.error().message());
  }
  if (w.n_rows < 0 || w.row_bytes < static_cast<size_t>(tensor::row_bytes(w.type, w.n_cols))) {
    return fmt::format("cuda {}: {} rows of {} bytes cannot hold {} {} values", op, w.n_rows,
                       w.row_bytes, w.n_cols, tensor::dtype_name(w.type));
  }
  return {};
}

}  // namespace

util::Result<std::vector<CudaDevice>> cuda_devices() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (is_no_gpu(err)) return util::errorf("cuda: no GPU available — {}", describe(err));
    return util::errorf("cuda: cannot list GPUs — {}", describe(err));
  }
  if (count == 0) return util::errorf("cuda: no GPU available — the CUDA driver reports none");
  std::vector<CudaDevice> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (const cudaError_t e = cudaGetDeviceProperties(&prop, i); e != cudaSuccess) {
      return util::errorf("cuda: cannot read the properties of GPU {} — {}", i, describe(e));
    }
    // The memory clock and bus width left cudaDeviceProp in CUDA 13; the attributes remain.
    int clock_khz = 0, bus_bits = 0;
    (void)cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, i);
    (void)cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, i);
    devices.push_back({.index = i,
                       .name = prop.name,
                       .sm_major = prop.major,
                       .sm_minor = prop.minor,
                       .n_sm = prop.multiProcessorCount,
                       .total_bytes = prop.totalGlobalMem,
                       .peak_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9});
  }
  (void)cudaGetLastError();  // a failed attribute query must not surface in a later op
  return devices;
}

util::Result<std::unique_ptr<CudaBackend>> make_cuda_backend(int device) {
  HR_ASSIGN_OR_RETURN(auto devices, cuda_devices());
  if (device < 0 || device >= static_cast<int>(devices.size())) {
    return util::errorf("cuda: no GPU {} — this machine has {} (0 to {})", device, devices.size(),
                        devices.size() - 1);
  }
  const CudaDevice& d = devices[device];
  if (d.sm_major * 10 + d.sm_minor < HEADROOM_CUDA_MIN_ARCH) {
    return util::errorf(
        "cuda: GPU {} ({}) is sm_{}{}, older than the oldest architecture built (sm_{}) — rebuild "
        "with CMAKE_CUDA_ARCHITECTURES including {}{}",
        device, d.name, d.sm_major, d.sm_minor, HEADROOM_CUDA_MIN_ARCH, d.sm_major, d.sm_minor);
  }
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return util::errorf("cuda: cannot use GPU {} ({}) — {}", device, d.name, describe(e));
  }
  cudaStream_t stream = nullptr;
  if (const cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return util::errorf("cuda: cannot create a stream on GPU {} ({}) — {}", device, d.name,
                        describe(e));
  }
  return std::unique_ptr<CudaBackend>(new CudaBackend(d, stream));
}

CudaBackend::~CudaBackend() {
  for (int id = 0; id < static_cast<int>(recordings_.size()); ++id) release_recording(id);
  if (stream_ != nullptr) {
    (void)cudaSetDevice(device_.index);
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
}

void CudaBackend::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
}

void CudaBackend::check(int cuda_error, const char* op) {
  const auto err = static_cast<cudaError_t>(cuda_error);
  if (err != cudaSuccess) fail(fmt::format("cuda {}: {}", op, describe(err)));
}

bool CudaBackend::enter(const char* op) {
  if (dropping_) return false;
  // cudaSetDevice costs a driver call per op; a thread only needs it when its GPU changes.
  thread_local int current_device = -1;
  if (current_device == device_.index) return true;
  const cudaError_t err = cudaSetDevice(device_.index);
  check(err, op);
  if (err == cudaSuccess) current_device = device_.index;
  return err == cudaSuccess;
}

util::Result<void*> CudaBackend::allocate(size_t bytes) {
  if (const cudaError_t e = cudaSetDevice(device_.index); e != cudaSuccess) {
    return util::errorf("cuda: cannot use GPU {} — {}", device_.index, describe(e));
  }
  void* p = nullptr;
  if (const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes); e != cudaSuccess) {
    (void)cudaGetLastError();  // out of memory is not sticky: clear it for the next call
    return util::errorf("cuda: cannot allocate {} bytes on GPU {} ({}) — {}", bytes, device_.index,
                        device_.name, describe(e));
  }
  return p;
}

void CudaBackend::release(void* device_ptr) {
  if (device_ptr == nullptr || !enter("release")) return;
  check(cudaFree(device_ptr), "release");
}

bool CudaBackend::may_wait(const char* op) {
  if (!recording_ && !dropping_) return true;
  fail(fmt::format("cuda {}: a synchronous copy inside a recorded or replayed pass", op));
  return false;
}

void CudaBackend::begin_record() {
  if (!enter("record")) return;
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "record");
  recording_ = true;
}

util::Result<int> CudaBackend::end_record() {
  recording_ = false;
  cudaGraph_t graph = nullptr;
  if (const cudaError_t e = cudaStreamEndCapture(stream_, &graph); e != cudaSuccess) {
    return util::errorf("cuda: recording a pass failed — {}", describe(e));
  }
  if (!error_.empty()) {  // an op was refused while recording: the recording lacks it
    (void)cudaGraphDestroy(graph);
    return synchronize().error();
  }
  RecordingCounts counts;
  size_t n_nodes = 0;
  if (cudaGraphGetNodes(graph, nullptr, &n_nodes) == cudaSuccess) {
    std::vector<cudaGraphNode_t> nodes(n_nodes);
    if (cudaGraphGetNodes(graph, nodes.data(), &n_nodes) == cudaSuccess) {
      for (cudaGraphNode_t node : nodes) {
        cudaGraphNodeType type{};
        if (cudaGraphNodeGetType(node, &type) != cudaSuccess) continue;
        counts.kernels += type == cudaGraphNodeTypeKernel;
        counts.copies += type == cudaGraphNodeTypeMemcpy;
        counts.other += type != cudaGraphNodeTypeKernel && type != cudaGraphNodeTypeMemcpy;
      }
    }
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (e != cudaSuccess) return util::errorf("cuda: a recorded pass cannot run — {}", describe(e));
  recordings_.push_back(exec);
  recording_counts_.push_back(counts);
  const int id = static_cast<int>(recordings_.size()) - 1;
  replay(id);
  return id;
}

CudaBackend::RecordingCounts CudaBackend::recording_counts(int id) const {
  if (id < 0 || id >= static_cast<int>(recording_counts_.size())) return {};
  return recording_counts_[id];
}

void CudaBackend::replay(int id) {
  dropping_ = false;
  if (!enter("replay")) return;
  if (id < 0 || id >= static_cast<int>(recordings_.size()) || recordings_[id] == nullptr) {
    return fail(fmt::format("cuda replay: no recorded pass {}", id));
  }
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(recordings_[id]), stream_), "replay");
}

void CudaBackend::release_recording(int id) {
  if (id < 0 || id >= static_cast<int>(recordings_.size()) || recordings_[id] == nullptr) return;
  (void)cudaSetDevice(device_.index);
  (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(recordings_[id]));
  recordings_[id] = nullptr;
}

util::Status CudaBackend::upload(void* device_dst, const void* host_src, size_t bytes) {
  if (!may_wait("upload")) return synchronize();
  if (enter("upload") && bytes > 0) {
    check(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_), "upload");
  }
  return synchronize();
}

void CudaBackend::upload_async(void* device_dst, const void* host_src, size_t bytes) {
  if (!enter("upload") || bytes == 0) return;
  check(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_), "upload");
}

util::Result<void*> CudaBackend::allocate_host(size_t bytes) {
  if (const cudaError_t e = cudaSetDevice(device_.index); e != cudaSuccess) {
    return util::errorf("cuda: cannot use GPU {} — {}", device_.index, describe(e));
  }
  void* p = nullptr;
  if (const cudaError_t e = cudaMallocHost(&p, bytes == 0 ? 1 : bytes); e != cudaSuccess) {
    (void)cudaGetLastError();
    return util::errorf("cuda: cannot allocate {} bytes of page-locked host memory — {}", bytes,
                        describe(e));
  }
  return p;
}

void CudaBackend::release_host(void* ptr) {
  if (ptr == nullptr || !enter("release")) return;
  check(cudaFreeHost(ptr), "release");
}

util::Status CudaBackend::download(void* host_dst, const void* device_src, size_t bytes) {
  if (!may_wait("download")) return synchronize();
  if (enter("download") && bytes > 0) {
    check(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_),
          "download");
  }
  return synchronize();
}

util::Status CudaBackend::synchronize() {
  // Inside a recorded or dropped span there is nothing to wait for (may_wait said so).
  if (!recording_ && !dropping_ && enter("synchronize")) {
    check(cudaStreamSynchronize(stream_), "synchronize (a kernel failed)");
  }
  if (error_.empty()) return {};
  util::Error error(std::move(error_));
  error_.clear();
  return error;
}

// --- Ops: check what the host can see, launch, record a failure -------------------------------

void CudaBackend::matmul(const Matrix& w, const float* x, float* y, int n_tokens) {
  if (!enter("matmul")) return;
  if (auto message = check_matrix("matmul", w); !message.empty()) return fail(std::move(message));
  check(detail::launch_matmul(w, x, y, n_tokens, stream_), "matmul");
}

void CudaBackend::get_rows(const Matrix& t, const int32_t* ids, int n, float s, float* out) {
  if (!enter("get_rows")) return;
  if (auto message = check_matrix("get_rows", t); !message.empty()) return fail(std::move(message));
  check(detail::launch_get_rows(t, ids, n, s, out, stream_), "get_rows");
}

void CudaBackend::rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
                          float eps) {
  if (!enter("rmsnorm")) return;
  if (n_rows > 0x7fffffff)
    return fail(fmt::format("cuda rmsnorm: {} rows exceed the grid limit", n_rows));
  check(detail::launch_rmsnorm(x, w, y, n, n_rows, eps, stream_), "rmsnorm");
}

void CudaBackend::rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
                       const RopeParams& p) {
  if (!enter("rope")) return;
  if (p.n_rot < 0 || p.n_rot % 2 != 0 || p.n_rot > head_dim) {
    return fail(
        fmt::format("cuda rope: n_rot {} must be even and at most head_dim {}", p.n_rot, head_dim));
  }
  check(detail::launch_rope(x, n_tokens, n_head, head_dim, pos, p, stream_), "rope");
}

void CudaBackend::attention(const AttentionBatch& batch) {
  if (!enter("attention")) return;
  if (batch.head_dim <= 0 || batch.head_dim > detail::kMaxHeadDim) {
    return fail(fmt::format("cuda attention: head_dim {} is outside 1..{}", batch.head_dim,
                            detail::kMaxHeadDim));
  }
  // The cache types sit inside the KvSpans, in device memory: they were checked when the cache
  // was planned (kv::check_cache_type allows exactly the types the kernel reads).
  check(detail::launch_attention(batch, device_.n_sm, stream_), "attention");
}

void CudaBackend::store_kv(DType kt, DType vt, int kv_dim, const float* k, const float* v,
                           const KvWrite* dst, int n) {
  if (!enter("store_kv")) return;
  for (DType t : {kt, vt}) {
    if (!detail::is_cache_type(t)) {
      return fail(fmt::format("cuda store_kv: cache type {} is not one of F32, F16, Q8_0, Q4_0",
                              tensor::dtype_name(t)));
    }
    if (auto s = tensor::check_row_length(t, kv_dim); !s) {
      return fail(fmt::format("cuda store_kv: {}", s.error().message()));
    }
  }
  check(detail::launch_store_kv(kt, vt, kv_dim, k, v, dst, n, stream_), "store_kv");
}

void CudaBackend::add(float* y, const float* x, int64_t n) {
  if (enter("add"))
    check(detail::launch_elementwise(detail::Elementwise::kAdd, y, x, 0.0f, n, stream_), "add");
}
void CudaBackend::mul(float* y, const float* x, int64_t n) {
  if (enter("mul"))
    check(detail::launch_elementwise(detail::Elementwise::kMul, y, x, 0.0f, n, stream_), "mul");
}
void CudaBackend::scale(float* y, float s, int64_t n) {
  if (enter("scale")) {
    check(detail::launch_elementwise(detail::Elementwise::kScale, y, nullptr, s, n, stream_),
          "scale");
  }
}
void CudaBackend::softcap(float* y, float cap, int64_t n) {
  if (enter("softcap")) {
    check(detail::launch_elementwise(detail::Elementwise::kSoftcap, y, nullptr, cap, n, stream_),
          "softcap");
  }
}
void CudaBackend::clamp(float* y, float lo, float hi, int64_t n) {
  if (enter("clamp")) check(detail::launch_clamp(y, lo, hi, n, stream_), "clamp");
}

namespace {

// The gated activations run one thread per output value: in place is fine when the output is the
// gate or the up rows themselves (stride n), but an output that overlaps other rows' inputs would
// race where the reference's row order makes it well defined.
bool aliasing_is_safe(const float* g, const float* u, const float* o, int64_t n, int64_t rows,
                      int64_t stride) {
  const auto bytes = [](int64_t count) { return count * static_cast<int64_t>(sizeof(float)); };
  const int64_t in_span = bytes((rows - 1) * stride + n), out_span = bytes(rows * n);
  const auto overlaps = [&](const float* a) {
    const auto a0 = reinterpret_cast<uintptr_t>(a), o0 = reinterpret_cast<uintptr_t>(o);
    return a0 < o0 + static_cast<uintptr_t>(out_span) && o0 < a0 + static_cast<uintptr_t>(in_span);
  };
  for (const float* in : {g, u}) {
    if (overlaps(in) && !(in == o && stride == n)) return false;
  }
  return true;
}

}  // namespace

void CudaBackend::silu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                           int64_t stride) {
  if (!enter("silu_mul")) return;
  if (n > 0 && rows > 0 && !aliasing_is_safe(g, u, o, n, rows, stride)) {
    return fail(
        "cuda silu_mul: the output overlaps other rows' gate/up values — write it elsewhere or "
        "over the "
        "gate with stride n");
  }
  check(detail::launch_act_mul(detail::Activation::kSilu, g, u, o, n, rows, stride, stream_),
        "silu_mul");
}

void CudaBackend::gelu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                           int64_t stride) {
  if (!enter("gelu_mul")) return;
  if (n > 0 && rows > 0 && !aliasing_is_safe(g, u, o, n, rows, stride)) {
    return fail(
        "cuda gelu_mul: the output overlaps other rows' gate/up values — write it elsewhere or "
        "over the "
        "gate with stride n");
  }
  check(detail::launch_act_mul(detail::Activation::kGelu, g, u, o, n, rows, stride, stream_),
        "gelu_mul");
}

void CudaBackend::copy(float* y, const float* x, int64_t n) {
  if (enter("copy")) check(detail::launch_copy_rows(y, n, x, n, n, 1, stream_), "copy");
}

void CudaBackend::copy_rows(float* y, int64_t ys, const float* x, int64_t xs, int64_t n,
                            int64_t rows) {
  if (enter("copy_rows"))
    check(detail::launch_copy_rows(y, ys, x, xs, n, rows, stream_), "copy_rows");
}

void CudaBackend::moe_route(const float* l, int t, int e, int k, const float* s, int32_t* ids,
                            float* w) {
  if (!enter("moe_route")) return;
  if (e <= 0 || e > kMaxExperts || k <= 0 || k > e) {
    return fail(fmt::format("cuda moe_route: top {} of {} experts is outside 1 ≤ k ≤ n_expert ≤ {}",
                            k, e, kMaxExperts));
  }
  check(detail::launch_moe_route(l, t, e, k, s, ids, w, stream_), "moe_route");
}

// --- Fused ops ---------------------------------------------------------------------------------

void CudaBackend::matmuls(const MatmulOut* outs, int n, Activations x, int n_tokens) {
  if (!enter("matmuls")) return;
  for (int i = 0; i < n; ++i) {
    if (auto message = check_matrix("matmuls", outs[i].w); !message.empty())
      return fail(std::move(message));
    if (outs[i].w.n_cols != outs[0].w.n_cols) {
      return fail(fmt::format("cuda matmuls: products of {} and {} columns cannot share an input",
                              outs[0].w.n_cols, outs[i].w.n_cols));
    }
  }
  check(detail::launch_matmuls(outs, n, x, n_tokens, stream_), "matmuls");
}

void CudaBackend::matmul_glu(const GluMatmul& a) {
  if (!enter("matmul_glu")) return;
  if (auto message = check_matrix("matmul_glu", a.gate); !message.empty())
    return fail(std::move(message));
  if (a.up.data != nullptr) {
    if (auto message = check_matrix("matmul_glu", a.up); !message.empty())
      return fail(std::move(message));
    if (a.up.n_rows != a.gate.n_rows || a.up.n_cols != a.gate.n_cols) {
      return fail(fmt::format("cuda matmul_glu: gate {}×{} and up {}×{} differ", a.gate.n_rows,
                              a.gate.n_cols, a.up.n_rows, a.up.n_cols));
    }
  }
  check(detail::launch_matmul_glu(a, stream_), "matmul_glu");
}

void CudaBackend::residual_norm(const ResidualNorm& a) {
  if (!enter("residual_norm")) return;
  if (a.n_out < 0 || a.n_out > 3) {
    return fail(fmt::format("cuda residual_norm: {} outputs (0 to 3)", a.n_out));
  }
  if (a.n > detail::kResidualNormMaxWidth) {
    return fail(fmt::format("cuda residual_norm: rows of {} values (at most {})", a.n,
                            detail::kResidualNormMaxWidth));
  }
  for (int j = 0; j < a.n_out; ++j) {
    if (a.out[j].y_q8 != nullptr && !act_q8_fits(a.n)) {
      return fail(fmt::format(
          "cuda residual_norm: 8-bit activations for rows of {} (not a multiple of 32)", a.n));
    }
  }
  check(detail::launch_residual_norm(a, stream_), "residual_norm");
}

void CudaBackend::attn_prep(const AttnPrep& a) {
  if (!enter("attn_prep")) return;
  if (a.rope.n_rot < 0 || a.rope.n_rot % 2 != 0 || a.rope.n_rot > a.head_dim) {
    return fail(fmt::format("cuda attn_prep: n_rot {} must be even and at most head_dim {}",
                            a.rope.n_rot, a.head_dim));
  }
  if (a.k != nullptr) {
    for (DType t : {a.k_type, a.v_type}) {
      if (!detail::is_cache_type(t)) {
        return fail(fmt::format("cuda attn_prep: cache type {} is not one of F32, F16, Q8_0, Q4_0",
                                tensor::dtype_name(t)));
      }
      if (auto s = tensor::check_row_length(t, a.n_head_kv * a.head_dim); !s) {
        return fail(fmt::format("cuda attn_prep: {}", s.error().message()));
      }
    }
  }
  check(detail::launch_attn_prep(a, stream_), "attn_prep");
}

void CudaBackend::moe_glu(const MoeGlu& a) {
  if (!enter("moe_glu")) return;
  for (const Matrix* m : {&a.gate_up, &a.gate, &a.up}) {
    if (m->data == nullptr) continue;
    if (auto message = check_matrix("moe_glu", *m); !message.empty())
      return fail(std::move(message));
  }
  if (a.n_expert <= 0 || a.n_expert > kMaxExperts || a.k <= 0 || a.k > a.n_expert) {
    return fail(fmt::format("cuda moe_glu: top {} of {} experts is outside 1 ≤ k ≤ n_expert ≤ {}",
                            a.k, a.n_expert, kMaxExperts));
  }
  check(detail::launch_moe_glu(a, stream_), "moe_glu");
}

void CudaBackend::moe_down(const MoeDown& a) {
  if (!enter("moe_down")) return;
  if (auto message = check_matrix("moe_down", a.down); !message.empty())
    return fail(std::move(message));
  check(detail::launch_moe_down(a, stream_), "moe_down");
}

void CudaBackend::top_k(const float* x, int64_t n, int n_rows, int k, int32_t* ids, float* values) {
  if (!enter("top_k")) return;
  if (k <= 0 || k > detail::kMaxTopK || k > n) {
    return fail(fmt::format("cuda top_k: k {} is outside 1..min({}, {})", k, detail::kMaxTopK, n));
  }
  check(detail::launch_top_k(x, n, n_rows, k, ids, values, stream_), "top_k");
}

void CudaBackend::scatter(const uint8_t* src, const ScatterPiece* pieces, const int32_t* n_pieces,
                          int max_pieces) {
  if (enter("scatter"))
    check(detail::launch_scatter(src, pieces, n_pieces, max_pieces, stream_), "scatter");
}

void CudaBackend::download_async(void* host_dst, const void* src, size_t bytes) {
  if (!enter("download") || bytes == 0) return;
  check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "download");
}

void CudaBackend::lora(const LoraDelta& a) {
  if (!enter("lora")) return;
  for (int i = 0; i < a.n_terms; ++i) {
    if (a.terms[i].rank <= 0 || a.scratch == nullptr)
      return fail(
          fmt::format("cuda lora: adapter {} of rank {} without scratch", i, a.terms[i].rank));
  }
  check(detail::launch_lora(a, stream_), "lora");
}

}  // namespace kernels::cuda
