// testing_util::EmulatedGpu — a kernels::Backend with memory of its own that computes on the CPU.
// It stands in for a GPU so that the device paths of the model (weights placed, activations staged,
// logits read back), of the KV cache (rows and views in device memory), of the engine (whole-GPU
// and split plans) and recorded passes run in CI, where there is no GPU.
//
// Its ops are the CPU backend's, so its results are the CPU path's bit for bit. What it adds is
// the device contract of kernels/ops.h, checked on every call:
// - every pointer an op takes, and every pointer inside the KV views and destinations it reads,
//   lies in memory this backend allocated (a host pointer would fault on a GPU);
// - host data arrives only through upload() or upload_async() from allocate_host() memory, and an
//   async copy reads its source when the stream reaches it — here, just before the next op,
//   copy or synchronize — so a host array rewritten too early shows up as wrong results;
// - a replayed recording is called exactly as it was recorded, with no synchronous copy between.
// The first breach is kept as one line and returned by synchronize(), like a GPU's sticky error.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/backend.h"
#include "kernels/ops.h"
#include "util/thread_pool.h"

namespace testing_util {

class EmulatedGpu final : public kernels::Backend {
 public:
  EmulatedGpu(util::ThreadPool& pool, int max_tokens, int64_t max_cols);
  // With a pool of its own (for an engine that creates its GPU backend itself).
  EmulatedGpu(int threads, int max_tokens, int64_t max_cols);
  ~EmulatedGpu() override;

  std::string_view name() const override { return "emulated-gpu"; }
  bool host_memory() const override { return false; }
  util::Result<void*> allocate(size_t bytes) override;
  void release(void* ptr) override;
  util::Status upload(void* dst, const void* host_src, size_t bytes) override;
  void upload_async(void* dst, const void* host_src, size_t bytes) override;
  util::Result<void*> allocate_host(size_t bytes) override;
  void release_host(void* ptr) override;
  util::Status download(void* host_dst, const void* src, size_t bytes) override;
  util::Status synchronize() override;

  bool can_record() const override { return true; }
  void begin_record() override;
  util::Result<int> end_record() override;
  void begin_replay() override;
  void replay(int id) override;
  void release_recording(int id) override;

  void matmul(const kernels::Matrix& w, const float* x, float* y, int n_tokens) override;
  void get_rows(const kernels::Matrix& table, const int32_t* ids, int n, float scale,
                float* out) override;
  void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
               float eps) override;
  void rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
            const kernels::RopeParams& p) override;
  void attention(const kernels::AttentionBatch& batch) override;
  void store_kv(kernels::DType k_type, kernels::DType v_type, int kv_dim, const float* k,
                const float* v, const kernels::KvWrite* dst, int n_tokens) override;
  void add(float* y, const float* x, int64_t n) override;
  void mul(float* y, const float* x, int64_t n) override;
  void scale(float* y, float s, int64_t n) override;
  void softcap(float* y, float cap, int64_t n) override;
  void clamp(float* y, float lo, float hi, int64_t n) override;
  void silu_mul(const float* gate, const float* up, float* out, int64_t n, int64_t n_rows,
                int64_t stride) override;
  void gelu_mul(const float* gate, const float* up, float* out, int64_t n, int64_t n_rows,
                int64_t stride) override;
  void copy(float* y, const float* x, int64_t n) override;
  void moe_route(const float* logits, int n_tokens, int n_expert, int k, const float* expert_scale,
                 int32_t* ids, float* weights) override;
  void copy_rows(float* y, int64_t y_stride, const float* x, int64_t x_stride, int64_t n,
                 int64_t n_rows) override;

  // A GPU's decode ops read 8-bit activations: the emulator writes them where a producing op is
  // given a destination (act_q8.h) and checks, where an op reads them, that they are the 8-bit
  // form of the f32 rows beside them — so a stale or mismatched buffer fails the pass.
  bool quantizes_activations() const override { return true; }
  void matmuls(const kernels::MatmulOut* outs, int n, kernels::Activations x,
               int n_tokens) override;
  void matmul_glu(const kernels::GluMatmul& a) override;
  void residual_norm(const kernels::ResidualNorm& a) override;
  void attn_prep(const kernels::AttnPrep& a) override;
  void moe_glu(const kernels::MoeGlu& a) override;
  void moe_down(const kernels::MoeDown& a) override;
  void top_k(const float* x, int64_t n, int n_rows, int k, int32_t* ids, float* values) override;
  void scatter(const uint8_t* src, const kernels::ScatterPiece* pieces, const int32_t* n_pieces,
               int max_pieces) override;
  void download_async(void* host_dst, const void* src, size_t bytes) override;
  void lora(const kernels::LoraDelta& a) override;

  // How many ops ran (replays count each recorded op), and how many calls a replay dropped.
  int64_t ops_run() const { return ops_run_; }
  int64_t replays() const { return replays_; }
  // The kernel launches a GPU makes for the ops that ran, by name in order ("attention" split
  // over the context is two: "attention.chunks", "attention.combine"); copies between host and
  // device by kind. Both count replayed ops. clear_counts() starts again.
  struct Copies {
    int64_t blocking_uploads = 0, async_uploads = 0, blocking_downloads = 0, async_downloads = 0;
  };
  const std::vector<std::string>& launches() const { return launches_; }
  const Copies& copies() const { return copies_; }
  void clear_counts() {
    launches_.clear();
    copies_ = {};
  }

 private:
  // An op as the stream runs it: its pointer checks, then the CPU backend's kernel. The
  // signature's first word names the op; `launches` is how many kernels a GPU runs for it.
  void issue(std::string signature, std::function<void()> run, int launches = 1);
  void run_now(const std::string& signature, const std::function<void()>& run, int launches);
  void flush_copies();
  // Records the first breach of the contract.
  void fail(std::string message);
  // Whether [p, p + bytes) lies in one allocation of `regions`.
  static bool inside(const std::map<uintptr_t, size_t>& regions, const void* p, size_t bytes);
  // Device memory check for op arguments: null is allowed only where `may_be_null`.
  void check(const char* op, const char* what, const void* p, size_t bytes,
             bool may_be_null = false);
  void check_spans(const kernels::AttentionBatch& batch);
  void check_writes(const kernels::KvWrite* dst, int n_tokens, size_t k_row, size_t v_row);
  void check_matrix(const char* op, const kernels::Matrix& w);
  // Where an op reads 8-bit activations: they must be those of the f32 rows beside them.
  void check_q8(const char* op, const float* x, const void* q8, int64_t n_cols, int n_rows);
  // Where an op was given a destination for 8-bit activations: writes those of y.
  void write_q8(const char* op, const float* y, void* q8, int64_t n_cols, int n_rows);

  std::unique_ptr<util::ThreadPool> own_pool_;
  kernels::cpu::CpuBackend cpu_;
  std::map<uintptr_t, size_t> device_, host_;  // allocations: begin → bytes
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  std::vector<Copy> pending_;  // upload_async copies not yet reached by the stream
  enum class Mode { kRun, kRecord, kReplay } mode_ = Mode::kRun;
  struct Recording {
    std::vector<std::string> signatures;
    std::vector<std::function<void()>> steps;
    std::vector<int> launches;
  };
  std::vector<Recording> recordings_;  // by id; released ones are emptied
  Recording current_;
  size_t replay_index_ = 0;  // calls matched so far in begin_replay()
  int64_t ops_run_ = 0, replays_ = 0;
  std::vector<std::string> launches_;
  Copies copies_;
  std::string error_;
};

}  // namespace testing_util
