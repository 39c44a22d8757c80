// kernels::cuda::CudaBackend — every op of the interface on one NVIDIA GPU (kernels in matmul.cu
// and ops.cu, strategies described there), and the device queries and memory helpers its callers
// need. This header includes no CUDA header: host code compiled by the C++ compiler uses it.
//
// Status: tested against kernels::ref on an H100 (tests/kernels/cuda_backend_test.cpp, all
// passing, also under compute-sanitizer memcheck); the engine runs whole models on it when the
// plan puts them on the GPU (tests/model/cuda_forward_test.cpp). See docs/cuda.md.
//
// Contract:
// - Every pointer an op receives is a device pointer of this backend's GPU, including the arrays
//   inside the op structs (AttentionBatch::q/out/pos/kv, the KvSpan each kv[t] points to, and its
//   k_blocks, v_blocks and cell_pos; KvWrite rows; RopeParams::inv_freq; ids; expert_scale).
//   The structs themselves (Matrix, AttentionBatch, RopeParams) are read on the host.
// - store_kv destinations (KvWrite k, v) are aligned to their cache type (4 bytes for f32, 2 for
//   the others), as kv::Cache lays them out and as tensor::quantize_row requires on the CPU.
// - Ops are asynchronous on the backend's stream, in issue order. An op cannot return an error
//   (Backend's signatures are void), so the first failure — a refused argument or a failed CUDA
//   call — is recorded as one line ("cuda matmul: …") and returned by the next synchronize().
// - Results: matmul and attention accumulate in f32 (the reference in double) and agree with it
//   within the tolerances of the CPU tests; get_rows, store_kv, rope, copies and add/mul/scale
//   give the reference's bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "util/result.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*; declared here so no CUDA header is needed

namespace kernels::cuda {

// A GPU as the CUDA runtime reports it.
struct CudaDevice {
  int index = 0;
  std::string name;                // "NVIDIA H100 80GB HBM3"
  int sm_major = 0, sm_minor = 0;  // compute capability
  int n_sm = 0;                    // multiprocessors
  size_t total_bytes = 0;          // device memory
  double peak_gbs = 0;  // memory clock × bus width × 2 (DDR), GB/s: the datasheet ceiling
};

// The GPUs this process can use, or a one-line error saying why there are none (no driver, no
// GPU, a driver older than the runtime this binary carries).
util::Result<std::vector<CudaDevice>> cuda_devices();

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  const CudaDevice& device() const { return device_; }

  void matmul(const Matrix& w, const float* x, float* y, int n_tokens) override;
  void get_rows(const Matrix& t, const int32_t* ids, int n, float s, float* out) override;
  void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
               float eps) override;
  void rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
            const RopeParams& p) override;
  void attention(const AttentionBatch& batch) override;
  void store_kv(DType kt, DType vt, int kv_dim, const float* k, const float* v, const KvWrite* dst,
                int n) override;
  void add(float* y, const float* x, int64_t n) override;
  void mul(float* y, const float* x, int64_t n) override;
  void scale(float* y, float s, int64_t n) override;
  void softcap(float* y, float cap, int64_t n) override;
  void clamp(float* y, float lo, float hi, int64_t n) override;
  void silu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                int64_t stride) override;
  void gelu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows,
                int64_t stride) override;
  void copy(float* y, const float* x, int64_t n) override;
  void moe_route(const float* l, int t, int e, int k, const float* s, int32_t* ids,
                 float* w) override;
  void copy_rows(float* y, int64_t ys, const float* x, int64_t xs, int64_t n,
                 int64_t rows) override;
  bool quantizes_activations() const override { return true; }
  void matmuls(const MatmulOut* outs, int n, Activations x, int n_tokens) override;
  void matmul_glu(const GluMatmul& a) override;
  void residual_norm(const ResidualNorm& a) override;
  void attn_prep(const AttnPrep& a) override;
  void moe_glu(const MoeGlu& a) override;
  void moe_down(const MoeDown& a) override;
  void top_k(const float* x, int64_t n, int n_rows, int k, int32_t* ids, float* values) override;
  void scatter(const uint8_t* src, const ScatterPiece* pieces, const int32_t* n_pieces,
               int max_pieces) override;
  void download_async(void* host_dst, const void* src, size_t bytes) override;
  void lora(const LoraDelta& a) override;

  // Device memory: every op's pointers come from here. upload and download complete before they
  // return (ordered after every op issued so far); upload_async is queued like an op.
  bool host_memory() const override { return false; }
  util::Result<void*> allocate(size_t bytes) override;
  void release(void* device_ptr) override;
  util::Status upload(void* device_dst, const void* host_src, size_t bytes) override;
  util::Status download(void* host_dst, const void* device_src, size_t bytes) override;
  void upload_async(void* device_dst, const void* host_src, size_t bytes) override;
  // Page-locked (cudaMallocHost): copies from it are queued without waiting for the stream.
  util::Result<void*> allocate_host(size_t bytes) override;
  void release_host(void* ptr) override;
  // Waits for every op issued so far; returns the first error recorded since the last call.
  util::Status synchronize() override;
  // Recorded passes are CUDA graphs captured from the backend's stream.
  bool can_record() const override { return true; }
  void begin_record() override;
  util::Result<int> end_record() override;
  void begin_replay() override { dropping_ = true; }
  void replay(int id) override;
  void release_recording(int id) override;
  // What a recording holds, as CUDA's graph counts its nodes: kernel launches, copies, the rest —
  // the decode budget measured on the GPU itself (tests/model/cuda_forward_test.cpp).
  struct RecordingCounts {
    int kernels = 0, copies = 0, other = 0;
  };
  RecordingCounts recording_counts(int id) const;

 private:
  friend util::Result<std::unique_ptr<CudaBackend>> make_cuda_backend(int device);
  CudaBackend(CudaDevice device, CUstream_st* stream)
      : device_(std::move(device)), stream_(stream) {}

  // Records the first failure of an op (later ones are usually its consequences).
  void fail(std::string message);
  // Makes this backend's GPU current for the calling thread; false (recorded) if that fails, and
  // false without a word while a replayed pass drops its ops.
  bool enter(const char* op);
  // Synchronous copies cannot be recorded or dropped: false (recorded) in those spans.
  bool may_wait(const char* op);
  // Records a failed launch or call of `op`.
  void check(int cuda_error, const char* op);

  CudaDevice device_;
  CUstream_st* stream_;
  std::string error_;
  bool recording_ = false;         // between begin_record() and end_record()
  bool dropping_ = false;          // between begin_replay() and replay()
  std::vector<void*> recordings_;  // cudaGraphExec_t by id; null once released
  std::vector<RecordingCounts> recording_counts_;
};

// The backend of GPU `device` (an index into cuda_devices()), or a one-line error: no driver, no
// such GPU, a GPU older than the architectures this binary was built for.
util::Result<std::unique_ptr<CudaBackend>> make_cuda_backend(int device);

}  // namespace kernels::cuda
