// The op interface: every operation a forward pass needs, implemented once per device.
//
// Shapes use the vocabulary of spec §0.1: T tokens in the batch, H = n_embd, activations are
// f32 row-major [T][width]. A weight matrix is stored as GGUF stores it: n_rows rows of n_cols
// values, so `y = W·x` means y[r] = dot(row r, x). Pointers are on the backend's device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernels/act_q8.h"
#include "kernels/op_args.h"
#include "tensor/dtype.h"
#include "util/result.h"

namespace kernels {

// A device's implementation of every op. One instance per device; the CPU one carries its
// thread pool. Implementations: kernels::ref (scalar truth), kernels::cpu, kernels::cuda.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Bytes of working memory the backend holds for its kernels (planned with the activations).
  virtual size_t scratch_bytes() const { return 0; }

  // The memory the ops read and write. Host backends (ref, cpu) compute on host memory, and these
  // defaults are plain aligned allocations and memcpy. A device backend (cuda) overrides them:
  // its ops then take only pointers from allocate() (and offsets into them), and callers stage
  // host data with upload() and read results back with download().
  virtual bool host_memory() const { return true; }
  virtual util::Result<void*> allocate(size_t bytes);
  virtual void release(void* ptr);
  // Host → backend memory, ordered after every op issued so far; complete when it returns.
  virtual util::Status upload(void* dst, const void* host_src, size_t bytes);
  // The same, queued like an op: it returns at once, and `host_src` (from allocate_host) must
  // stay unchanged until the next synchronize(). A failure is reported there.
  virtual void upload_async(void* dst, const void* host_src, size_t bytes);
  // Host memory upload_async can read without stalling the queue (page-locked on a GPU).
  virtual util::Result<void*> allocate_host(size_t bytes);
  virtual void release_host(void* ptr);
  // Backend memory → host, after every op issued so far has finished.
  virtual util::Status download(void* host_dst, const void* src, size_t bytes);
  // Waits for every op issued so far; returns the first error an op recorded since the last call
  // (host backends compute synchronously and record none).
  virtual util::Status synchronize() { return {}; }

  // Recorded passes (device backends: a CUDA graph), which save one launch per op. Between
  // begin_record() and end_record() the ops (and upload_async) are recorded, not run;
  // end_record() runs the recording once and returns its id. Between begin_replay() and
  // replay(id) op calls are dropped: the caller promises they are exactly the recorded ones —
  // same arguments, pointers and sizes; only the contents of the memory they read may differ —
  // and replay(id) runs the recording. No synchronous copy may come in between.
  virtual bool can_record() const { return false; }
  virtual void begin_record() {}
  virtual util::Result<int> end_record() {
    return util::errorf("{}: cannot record passes", name());
  }
  virtual void begin_replay() {}
  virtual void replay(int /*id*/) {}
  virtual void release_recording(int /*id*/) {}

  // y[t] = W · x[t] for t < T.   x: [T][n_cols], y: [T][n_rows]
  virtual void matmul(const Matrix& w, const float* x, float* y, int n_tokens) = 0;
  // out[i] = scale · row ids[i] of `table` dequantized.   out: [n][n_cols]
  virtual void get_rows(const Matrix& table, const int32_t* ids, int n, float scale, float* out) = 0;
  // Each of n_rows rows of length n: y = x / sqrt(mean(x²) + eps) ⊙ w (w may be null). In place ok.
  virtual void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows, float eps) = 0;
  // Rotates the first n_rot dims of every head of x: [T][n_head][head_dim], in place.
  virtual void rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
                    const RopeParams& p) = 0;
  virtual void attention(const AttentionBatch& batch) = 0;
  // Quantizes K/V rows ([T][kv_dim] each) into the cache rows named by `dst`.
  virtual void store_kv(DType k_type, DType v_type, int kv_dim, const float* k, const float* v,
                        const KvWrite* dst, int n_tokens) = 0;

  // Elementwise over n values.
  virtual void add(float* y, const float* x, int64_t n) = 0;          // y += x
  virtual void mul(float* y, const float* x, int64_t n) = 0;          // y *= x
  virtual void scale(float* y, float s, int64_t n) = 0;               // y *= s
  virtual void softcap(float* y, float cap, int64_t n) = 0;           // y = cap·tanh(y/cap)
  virtual void clamp(float* y, float lo, float hi, int64_t n) = 0;    // y = min(max(y, lo), hi)
  // out = act(gate) ⊙ up over [n_rows][n]; gate/up rows are `stride` apart (fused gate_up).
  virtual void silu_mul(const float* gate, const float* up, float* out, int64_t n, int64_t n_rows,
                        int64_t stride) = 0;
  virtual void gelu_mul(const float* gate, const float* up, float* out, int64_t n, int64_t n_rows,
                        int64_t stride) = 0;
  virtual void copy(float* y, const float* x, int64_t n) = 0;
  // MoE routing per token (spec §2.3 step 7): softmax over n_expert logits, the top k by
  // probability (ties → lower id), weights renormalised over the k, then times expert_scale[e]
  // (null = 1).   logits: [T][n_expert] → ids, weights: [T][k]
  virtual void moe_route(const float* logits, int n_tokens, int n_expert, int k, const float* expert_scale,
                         int32_t* ids, float* weights) = 0;
  // Copies an [n_rows][n] block between row strides (slicing per-layer inputs, gathering rows).
  virtual void copy_rows(float* y, int64_t y_stride, const float* x, int64_t x_stride, int64_t n,
                         int64_t n_rows) = 0;

  // --- Fused ops: what a decode step runs, one kernel launch each on a device backend (attention,
  // above, is two: the chunks of the context, then their combination). The defaults (ops.cpp)
  // compose the ops above in the order the models called them before these existed — so host
  // backends keep their results bit for bit — and read their arguments directly, so a device
  // backend overrides every one.

  // Whether the ops that produce activations write their 8-bit form (act_q8.h) where given a
  // destination, and the matmuls read it. Host backends quantize inside their matmuls instead and
  // leave such destinations untouched. A destination is only given for batches of at most
  // kActQ8MaxTokens tokens (a MoE layer's expert rows: tokens × k) of a width that is a multiple
  // of 32.
  virtual bool quantizes_activations() const { return false; }
  // outs[i].y = outs[i].w · x for i < n: products that share their input (q, k and v).
  virtual void matmuls(const MatmulOut* outs, int n, Activations x, int n_tokens);
  // Gated products: gate/up and GeGLU, Gemma 4's per-layer-input gate (op_args.h).
  virtual void matmul_glu(const GluMatmul& a);
  // The residual stream between two matmuls: branch norms, the add, the layer scale and the norms
  // of the next matmuls' inputs.
  virtual void residual_norm(const ResidualNorm& a);
  // q/k norms, RoPE, V's norm and the K/V store of one attention layer.
  virtual void attn_prep(const AttnPrep& a);
  // A MoE layer's routing and experts (op_args.h: MoeGlu, MoeDown), with the routing read where
  // the ops run: no host round trip.
  virtual void moe_glu(const MoeGlu& a);
  virtual void moe_down(const MoeDown& a);
  // The k largest of each of n_rows rows of n values, largest first (ties: the lower index first):
  // ids and values [n_rows][k]. Sampling reads these instead of whole rows of logits.
  virtual void top_k(const float* x, int64_t n, int n_rows, int k, int32_t* ids, float* values);
  // Moves pieces[i] for i < *n_pieces (pieces, n_pieces and src in backend memory) from src +
  // offset to dst: one upload of a step's small arrays, then this, instead of an upload each.
  // max_pieces bounds *n_pieces (a kernel's grid).
  virtual void scatter(const uint8_t* src, const ScatterPiece* pieces, const int32_t* n_pieces,
                       int max_pieces);
  // Backend memory → host memory from allocate_host, queued like an op: complete at the next
  // synchronize().
  virtual void download_async(void* host_dst, const void* src, size_t bytes);

  // The LoRA terms of a matrix product (op_args.h: LoraDelta), unmerged: the weights stay as they
  // are and each token gets its own adapter's update. The default runs kernels::ref on host memory.
  virtual void lora(const LoraDelta& a);

  // The audio encoder's ops (src/mm, Gemma 4's conformer). Their defaults run kernels::ref on host
  // memory, which is all a host backend needs (the work is small beside the matrix products); a
  // device backend does not run them, so the planner keeps the audio encoder on the CPU.
  virtual void relu(float* y, int64_t n);  // y = max(y, 0)
  virtual void silu(float* y, int64_t n);  // y = y·sigmoid(y)
  // Each of n_rows rows of length n: y = (x − mean) / sqrt(variance + eps) ⊙ w. In place ok.
  virtual void layer_norm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
                          float eps);
  // out = x[:, :n] ⊙ sigmoid(x[:, n:])   x: [n_rows][2n], out: [n_rows][n]
  virtual void glu(const float* x, float* out, int64_t n, int64_t n_rows);
  // Causal depthwise convolution over time: y[t][c] = Σ_j w[c][j] · x[t − K + 1 + j][c], x = 0
  // before time 0.   x, y: [n_tokens][n_channels], w: [n_channels][K]
  virtual void depthwise_conv1d(const float* x, const float* w, float* y, int64_t n_tokens,
                                int64_t n_channels, int kernel);
  virtual void im2col_3x3_s2(const Im2Col3x3S2& a);
  virtual void local_attention(const LocalAttention& a);
};

}  // namespace kernels
