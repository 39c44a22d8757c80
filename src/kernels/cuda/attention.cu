// The CUDA attention kernels: decode attention split over the context (two launches: each chunk's
// softmax state, then their combination), attention over the whole context in one block per
// (head, token) for larger batches, and attn_prep (q/k norms, RoPE, V's norm and the K/V store in
// one launch). The arithmetic that decides their results lives in attention_lanes.h and
// cache_rows.h, which the CPU tests run (tests/kernels/cuda_attention_lanes_test.cpp).
#include <cfloat>
#include <cmath>

#include "kernels/act_q8.h"
#include "kernels/cuda/attention_lanes.h"
#include "kernels/cuda/cache_rows.h"
#include "kernels/cuda/decode.cuh"
#include "kernels/cuda/launch.h"

namespace kernels::cuda::detail {
namespace {

constexpr unsigned int kFullMask = 0xffffffffu;
// Grid dimension y is limited to 65535: launchers that put tokens there go in slices.
constexpr int kMaxGridY = 65535;

static_assert(kMaxHeadDim / kAttnUnit <= 32 * kAttnMaxParts,
              "a head's units must fit a team of kAttnMaxParts warps");

unsigned int blocks_for(int64_t n, int64_t per_block) {
  return static_cast<unsigned int>((n + per_block - 1) / per_block);
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// The sum over each aligned group of `width` lanes (a power of two ≤ 32); all 32 lanes call it.
__device__ __forceinline__ float lanes_sum(float v, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ const uint8_t* cell_row(const uint8_t* const* blocks,
                                                   int cells_per_block, size_t row_bytes,
                                                   int cell) {
  return blocks[cell / cells_per_block] + static_cast<size_t>(cell % cells_per_block) * row_bytes;
}

// Lane `lane` of a warp holding value x of a 32-value block writes its quant at quants[lane], and
// lane 0 the block's (d, s): quantize_act_block's bytes, the maximum and the integer sum taken
// across the lanes (neither depends on the order).
__device__ __forceinline__ void quantize_act_lane(float x, int lane, int8_t* quants,
                                                  float* scales) {
  const float amax = warp_max(fabsf(x));
  const int q = act_q8_quant(x, amax);
  const int sum = warp_sum(q);
  quants[lane] = static_cast<int8_t>(q);
  if (lane == 0) act_q8_block_scales(amax, sum, scales);
}

// --- Decode attention, kernel 1: one chunk of the context for the query heads of a KV head -------
//
// Block (b, t) of the grid (blocks_per_token, T) finds its work with attn_block_work: KV head g,
// query heads [first_head, first_head + n_heads) of g's group, chunks split, split + n_split, … of
// the token's cells (attn_chunk_count). Each chunk is walked in its tiles of kAttnTileCells cells
// (kAttnChunkStride apart), each in three steps separated by barriers:
//   1. scores: team j of the block reads the K rows of cells j, j + n_teams, … of the tile (its
//      thread u the head's values [8u, 8u + 8), with 16-byte loads for f16/f32) and forms their
//      dot products with every query head at once, so a row is read once for the group; a team's
//      lanes reduce them with shuffles into one part per warp.
//   2. softmax: warp h adds head h's parts, scales them, and advances its online softmax
//      (softmax_advance), writing the tile's weights exp(s − m) and the factor that rescales acc.
//   3. values: the teams read the V rows of the same cells, and each thread adds weight · v to its
//      accumulators acc[head][8] (registers).
// At the end of a chunk the teams' accumulators are summed (in team order) and written, with each
// head's m and l, to the chunk's partials. Invisible cells are skipped without reading their rows.

// Cells whose rows a thread loads before it uses any: loads in flight per thread.
constexpr int kCellsInFlight = 4;

struct __align__(16) ChunkShared {
  // The block's query rows [n_heads][q_stride]; after the last tile, the teams' summed acc.
  float rows[kAttnBlockHeads * kMaxHeadDim];
  float parts[kAttnMaxParts][kAttnBlockHeads][kAttnTileCells];  // dot products, per warp of a team
  float weight[kAttnBlockHeads][kAttnTileCells];                // exp(s − m) of each cell
  float factor[kAttnBlockHeads];                                // acc's rescaling for the tile
  int visible[kAttnTileCells];
};

// What a thread of kernel 1 knows about its block and its place in it.
struct ChunkThread {
  KvSpan kv;
  int32_t q_pos, from, until;  // from, until: its image's first and last positions
  int window;
  AttnBlockWork work;
  AttnTeams teams;
  int q_stride;    // floats per query row in shared memory (whole units, zero-padded)
  int team, unit;  // its team, and its unit within the team
  bool reads;      // whether its unit is one of the head's (team < n_teams, unit < units)
  int row_value;   // its unit's first value within a cache row
  int n_valid;     // values of its unit inside the head (8 but for a partial last unit)
};

__device__ __forceinline__ void score_tile(ChunkShared& sh, const ChunkThread& th, int tile,
                                           int n_tile) {
  const AttnTeams& tm = th.teams;
  const int lane = threadIdx.x % 32;
  const int width = tm.team_size < 32 ? tm.team_size : 32;
  const bool writer = tm.team_size <= 32 ? th.unit == 0 : lane == 0;
  const int part = th.unit / 32;
  const int rounds = (kAttnTileCells + tm.n_teams - 1) / tm.n_teams;
  for (int r0 = 0; r0 < rounds; r0 += kCellsInFlight) {
    float k[kCellsInFlight][kAttnUnit];
    bool valid[kCellsInFlight];
    int cc[kCellsInFlight];
#pragma unroll
    for (int i = 0; i < kCellsInFlight; ++i) {
      cc[i] = th.team + (r0 + i) * tm.n_teams;
      valid[i] = th.team < tm.n_teams && cc[i] < n_tile &&
                 key_visible(th.kv.cell_pos[tile + cc[i]], th.q_pos, th.from, th.until, th.window);
      if (valid[i] && th.reads) {
        const uint8_t* row =
            cell_row(th.kv.k_blocks, th.kv.cells_per_block, th.kv.k_row_bytes, tile + cc[i]);
        load_cache_unit(th.kv.k_type, row, th.row_value, th.n_valid, k[i]);
      } else {
#pragma unroll
        for (int j = 0; j < kAttnUnit; ++j) k[i][j] = 0.0f;
      }
    }
    if (th.unit == 0 && th.team < tm.n_teams) {
#pragma unroll
      for (int i = 0; i < kCellsInFlight; ++i)
        if (cc[i] < n_tile) sh.visible[cc[i]] = valid[i];
    }
#pragma unroll
    for (int h = 0; h < kAttnBlockHeads; ++h) {
      if (h >= th.work.n_heads) break;  // uniform over the block
      const float4* q4 = reinterpret_cast<const float4*>(sh.rows + h * th.q_stride +
                                                         (th.reads ? th.unit * kAttnUnit : 0));
      const float4 qa = q4[0], qb = q4[1];
      const float q[kAttnUnit] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
      for (int i = 0; i < kCellsInFlight; ++i) {
        float dot = 0.0f;
#pragma unroll
        for (int j = 0; j < kAttnUnit; ++j) dot = fmaf(q[j], k[i][j], dot);
        dot = lanes_sum(dot, width);
        if (writer && valid[i]) sh.parts[part][h][cc[i]] = dot;
      }
    }
  }
}

// Warp h's step 2 for its head h.
__device__ __forceinline__ void softmax_tile(ChunkShared& sh, SoftmaxRun& run, int h, int n_tile,
                                             int n_parts, float scale) {
  const int lane = threadIdx.x % 32;
  constexpr int kPerLane = kAttnTileCells / 32;
  float s[kPerLane];
  float tile_max = -INFINITY;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int cc = lane + 32 * k;
    s[k] = -INFINITY;
    if (cc < n_tile && sh.visible[cc]) {
      float dot = sh.parts[0][h][cc];
      for (int p = 1; p < n_parts; ++p) dot += sh.parts[p][h][cc];
      s[k] = dot * scale;
    }
    tile_max = fmaxf(tile_max, s[k]);
  }
  const float factor = softmax_advance(run, warp_max(tile_max));
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const float w = softmax_weight(run, s[k]);
    sh.weight[h][lane + 32 * k] = w;
    sum += w;
  }
  run.l += warp_sum(sum);
  if (lane == 0) sh.factor[h] = factor;
}

__device__ __forceinline__ void accumulate_tile(const ChunkShared& sh, const ChunkThread& th,
                                                int tile, int n_tile,
                                                float (&acc)[kAttnBlockHeads][kAttnUnit]) {
#pragma unroll
  for (int h = 0; h < kAttnBlockHeads; ++h) {
    if (h >= th.work.n_heads) break;
    const float factor = sh.factor[h];
#pragma unroll
    for (int j = 0; j < kAttnUnit; ++j) acc[h][j] *= factor;
  }
  const AttnTeams& tm = th.teams;
  const int rounds = (kAttnTileCells + tm.n_teams - 1) / tm.n_teams;
  for (int r0 = 0; r0 < rounds; r0 += kCellsInFlight) {
    float v[kCellsInFlight][kAttnUnit];
    bool use[kCellsInFlight];
    int cc[kCellsInFlight];
#pragma unroll
    for (int i = 0; i < kCellsInFlight; ++i) {
      cc[i] = th.team + (r0 + i) * tm.n_teams;
      use[i] = th.reads && cc[i] < n_tile && sh.visible[cc[i]];
      if (use[i]) {
        const uint8_t* row =
            cell_row(th.kv.v_blocks, th.kv.cells_per_block, th.kv.v_row_bytes, tile + cc[i]);
        load_cache_unit(th.kv.v_type, row, th.row_value, th.n_valid, v[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < kCellsInFlight; ++i) {
      if (!use[i]) continue;
#pragma unroll
      for (int h = 0; h < kAttnBlockHeads; ++h) {
        if (h >= th.work.n_heads) break;
        const float w = sh.weight[h][cc[i]];
#pragma unroll
        for (int j = 0; j < kAttnUnit; ++j) acc[h][j] = fmaf(w, v[i][j], acc[h][j]);
      }
    }
  }
}

// The teams' accumulators summed in team order (in the rows, which the tiles no longer read), then
// every head's (acc, m, l) written to the partials.
__device__ __forceinline__ void write_chunk_state(ChunkShared& sh, const ChunkThread& th,
                                                  const float (&acc)[kAttnBlockHeads][kAttnUnit],
                                                  const SoftmaxRun& run, const AttentionBatch& b,
                                                  int t, int chunk) {
  float* sums = sh.rows;
  const int n_heads = th.work.n_heads;
  for (int i = threadIdx.x; i < n_heads * th.q_stride; i += blockDim.x) sums[i] = 0.0f;
  __syncthreads();
  for (int team = 0; team < th.teams.n_teams; ++team) {
    if (th.reads && th.team == team) {
#pragma unroll
      for (int h = 0; h < kAttnBlockHeads; ++h) {
        if (h >= n_heads) break;
        float* s = sums + h * th.q_stride + th.unit * kAttnUnit;
#pragma unroll
        for (int j = 0; j < kAttnUnit; ++j) s[j] += acc[h][j];
      }
    }
    __syncthreads();
  }
  const int d = b.head_dim;
  for (int i = threadIdx.x; i < n_heads * d; i += blockDim.x) {
    const int h = i / d, j = i % d;
    b.partials[attn_partial_offset(t, b.n_head, th.work.first_head + h, chunk, d) + j] =
        sums[h * th.q_stride + j];
  }
  const int warp = threadIdx.x / 32;
  if (warp < n_heads && threadIdx.x % 32 == 0) {
    float* state =
        b.partials + attn_partial_offset(t, b.n_head, th.work.first_head + warp, chunk, d);
    state[d] = run.m;
    state[d + 1] = run.l;
  }
}

__global__ void __launch_bounds__(kAttnThreads)
    attention_chunks_kernel(AttentionBatch b, int blocks_per_token) {
  __shared__ ChunkShared sh;
  const int t = blockIdx.y;
  ChunkThread th;
  th.kv = *b.kv[t];
  const AttnSplitPlan plan = attn_split_plan(blocks_per_token, b.n_head, th.kv.n_head_kv);
  th.work = attn_block_work(plan, th.kv.n_head_kv, static_cast<int>(blockIdx.x));
  if (!th.work.valid) return;
  const int n_chunks = attn_chunk_count(th.kv.n_cells);
  if (th.work.split >= n_chunks) return;  // the context is too short for this block's chunks

  const int d = b.head_dim;
  th.q_pos = b.pos[t];
  th.from = b.attend_from ? b.attend_from[t] : th.q_pos;
  th.until = b.attend_until ? b.attend_until[t] : th.q_pos;
  th.window = b.window;
  th.teams = attn_teams(d);
  th.q_stride = th.teams.units * kAttnUnit;
  th.team = static_cast<int>(threadIdx.x) / th.teams.team_size;
  th.unit = static_cast<int>(threadIdx.x) % th.teams.team_size;
  th.reads = th.team < th.teams.n_teams && th.unit < th.teams.units;
  th.row_value = th.work.kv_head * th.kv.head_dim + th.unit * kAttnUnit;
  th.n_valid = d - th.unit * kAttnUnit < kAttnUnit ? d - th.unit * kAttnUnit : kAttnUnit;

  const float* q = b.q + (static_cast<int64_t>(t) * b.n_head + th.work.first_head) * d;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int n_cells = th.kv.n_cells;
  for (int chunk = th.work.split; chunk < n_chunks; chunk += plan.n_split) {
    // The query rows (the previous chunk's state was summed where they lie).
    for (int i = threadIdx.x; i < th.work.n_heads * th.q_stride; i += blockDim.x) {
      const int h = i / th.q_stride, j = i % th.q_stride;
      sh.rows[i] = j < d ? q[h * d + j] : 0.0f;
    }
    __syncthreads();
    float acc[kAttnBlockHeads][kAttnUnit] = {};
    SoftmaxRun run;  // warp h's, for head h
    for (int tile = attn_chunk_first_cell(chunk); tile < n_cells; tile += kAttnChunkStride) {
      const int n_tile = n_cells - tile < kAttnTileCells ? n_cells - tile : kAttnTileCells;
      score_tile(sh, th, tile, n_tile);
      __syncthreads();
      if (warp < th.work.n_heads) softmax_tile(sh, run, warp, n_tile, th.teams.n_parts, b.scale);
      __syncthreads();
      accumulate_tile(sh, th, tile, n_tile, acc);
      __syncthreads();  // the tile's shared state is read before the next tile writes it
    }
    write_chunk_state(sh, th, acc, run, b, t, chunk);
    __syncthreads();  // the sums are read before the next chunk's query rows replace them
  }
}

// --- Decode attention, kernel 2: the chunks of each head combined -------------------------------
//
// One thread per output value of a token (grid: (values / kCombineThreads, T)); a warp holds 32
// consecutive values, which are one block of the 8-bit form when out_q8 is given.

constexpr int kCombineThreads = 128;

__global__ void __launch_bounds__(kCombineThreads) attention_combine_kernel(AttentionBatch b) {
  const int t = blockIdx.y;
  const KvSpan* kv = b.kv[t];
  const int n_chunks = attn_chunk_count(kv->n_cells);
  const int d = b.head_dim;
  const int64_t width = static_cast<int64_t>(b.n_head) * d;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (i - lane >= width) return;  // whole warps only: the 8-bit blocks need all 32 lanes
  float value = 0.0f;
  if (i < width) {
    const int h = static_cast<int>(i / d), j = static_cast<int>(i % d);
    value =
        attn_combine_value(b.partials + attn_partial_offset(t, b.n_head, h, 0, d), n_chunks, d, j);
    b.out[t * width + i] = value;
  }
  if (b.out_q8 != nullptr) {  // width is a multiple of 32 (checked at launch): i < width here
    const int64_t block = i / kActBlock;
    quantize_act_lane(value, lane, act_q8_quants(b.out_q8, width, t) + block * kActBlock,
                      act_q8_scales(b.out_q8, width, t) + 2 * block);
  }
}

// --- Attention over the whole context: one block per (head, token), online softmax --------------
//
// For batches too large for the partials (prefill). Warp w of the block scans cells w, w +
// kAttnWarps, … of the token's cache. For a visible cell, its lanes form q·k over the head's dims
// (K decoded value by value from the stored row, so the cache is never copied), reduce it with
// shuffles, and fold the cell into the warp's running maximum m, sum l and accumulator
// acc[head_dim] (shared memory, one row per warp, each lane owning dims lane, lane + 32, …). At the
// end the warps' (m, l, acc) are merged. Reads: the visible cells' K and V rows once per query
// head. Shared memory: (1 + kAttnWarps) · head_dim floats.

constexpr int kAttnWarps = 8;

__global__ void __launch_bounds__(32 * kAttnWarps) attention_kernel(AttentionBatch b, int t0) {
  extern __shared__ float smem[];
  const int h = blockIdx.x, t = t0 + blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int d = b.head_dim;
  float* q_s = smem;                      // [d]
  float* acc_all = smem + d;              // [kAttnWarps][d]
  float* m_l = acc_all + kAttnWarps * d;  // [kAttnWarps] maxima, then [kAttnWarps] sums
  float* acc = acc_all + warp * d;

  const KvSpan kv = *b.kv[t];
  const int group = b.n_head / kv.n_head_kv;
  const int first = (h / group) * kv.head_dim;  // this head's KV head within a cache row
  const int32_t q_pos = b.pos[t];
  const int32_t from = b.attend_from ? b.attend_from[t] : q_pos;
  const int32_t until = b.attend_until ? b.attend_until[t] : q_pos;
  const int64_t offset = (static_cast<int64_t>(t) * b.n_head + h) * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) q_s[i] = b.q[offset + i];
  for (int i = lane; i < d; i += 32) acc[i] = 0.0f;
  __syncthreads();

  float m = -INFINITY, l = 0.0f;
  for (int c = warp; c < kv.n_cells; c += kAttnWarps) {
    const int32_t p = kv.cell_pos[c];
    if (!key_visible(p, q_pos, from, until, b.window)) continue;  // warp-uniform
    const uint8_t* k_row = cell_row(kv.k_blocks, kv.cells_per_block, kv.k_row_bytes, c);
    float dot = 0.0f;
    for (int i = lane; i < d; i += 32)
      dot = fmaf(q_s[i], cache_value(kv.k_type, k_row, first + i), dot);
    const float s = warp_sum(dot) * b.scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 for the first visible cell (m = −inf)
    const float weight = expf(s - m_new);
    l = l * correction + weight;
    const uint8_t* v_row = cell_row(kv.v_blocks, kv.cells_per_block, kv.v_row_bytes, c);
    for (int i = lane; i < d; i += 32) {
      acc[i] = acc[i] * correction + weight * cache_value(kv.v_type, v_row, first + i);
    }
    m = m_new;
  }
  if (lane == 0) {
    m_l[warp] = m;
    m_l[kAttnWarps + warp] = l;
  }
  __syncthreads();

  float* out = b.out + offset;
  float max_all = -INFINITY;
#pragma unroll
  for (int w = 0; w < kAttnWarps; ++w) max_all = fmaxf(max_all, m_l[w]);
  if (max_all == -INFINITY) {  // nothing visible: the reference writes zeros
    for (int i = threadIdx.x; i < d; i += blockDim.x) out[i] = 0.0f;
    return;
  }
  float factor[kAttnWarps];
  float denom = 0.0f;
#pragma unroll
  for (int w = 0; w < kAttnWarps; ++w) {
    factor[w] = m_l[w] == -INFINITY ? 0.0f : expf(m_l[w] - max_all);
    denom += m_l[kAttnWarps + w] * factor[w];
  }
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kAttnWarps; ++w) o += acc_all[w * d + i] * factor[w];
    out[i] = o / denom;
  }
}

size_t attention_shared_bytes(int head_dim) {
  return (static_cast<size_t>(1 + kAttnWarps) * head_dim + 2 * kAttnWarps) * sizeof(float);
}

// The 8-bit form of rows of `width` values (a multiple of 32): grid (width / kCombineThreads,
// rows).
__global__ void __launch_bounds__(kCombineThreads)
    quantize_act_rows_kernel(const float* x, int64_t width, void* out) {
  const int row = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (i - lane >= width) return;
  const int64_t block = i / kActBlock;
  quantize_act_lane(x[row * width + i], lane, act_q8_quants(out, width, row) + block * kActBlock,
                    act_q8_scales(out, width, row) + 2 * block);
}

cudaError_t launch_split_attention(const AttentionBatch& batch, int n_sm, cudaStream_t stream) {
  const int blocks = attn_blocks_per_token(batch.n_tokens, batch.n_head, n_sm > 0 ? n_sm : 1);
  attention_chunks_kernel<<<dim3(blocks, batch.n_tokens), kAttnThreads, 0, stream>>>(batch, blocks);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  const int64_t width = static_cast<int64_t>(batch.n_head) * batch.head_dim;
  attention_combine_kernel<<<dim3(blocks_for(width, kCombineThreads), batch.n_tokens),
                             kCombineThreads, 0, stream>>>(batch);
  return cudaGetLastError();
}

cudaError_t launch_whole_attention(const AttentionBatch& batch, cudaStream_t stream) {
  const size_t shared = attention_shared_bytes(batch.head_dim);  // ≤ 37 KB at kMaxHeadDim
  for (int t0 = 0; t0 < batch.n_tokens; t0 += kMaxGridY) {
    const int nt = batch.n_tokens - t0 < kMaxGridY ? batch.n_tokens - t0 : kMaxGridY;
    attention_kernel<<<dim3(batch.n_head, nt), 32 * kAttnWarps, shared, stream>>>(batch, t0);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  if (batch.out_q8 == nullptr) return cudaSuccess;
  // A caller that wants the 8-bit form without giving the partials: a third launch.
  const int64_t width = static_cast<int64_t>(batch.n_head) * batch.head_dim;
  for (int t0 = 0; t0 < batch.n_tokens; t0 += kMaxGridY) {
    const int nt = batch.n_tokens - t0 < kMaxGridY ? batch.n_tokens - t0 : kMaxGridY;
    quantize_act_rows_kernel<<<dim3(blocks_for(width, kCombineThreads), nt), kCombineThreads, 0,
                               stream>>>(batch.out + t0 * width, width,
                                         act_q8_quants(batch.out_q8, width, t0));
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// --- attn_prep: one launch per batch
// --------------------------------------------------------------
//
// Grid (ceil(n_head / kPrepWarps) + 1, T): the first blocks norm and rotate q, a warp per head;
// the last block of a token prepares its K and V heads (a warp per KV head), then, after a
// barrier, encodes the token's K and V rows into the cache (a thread per value or 32-value block).
// A warp stages its head in shared memory so RoPE can pair dims held by different lanes.

constexpr int kPrepWarps = 8;

// out = rope(norm(x)), each step optional, through the warp's row buffer `buf`. In place is fine.
__device__ void prepare_head(float* buf, const float* x, float* out, int head_dim, bool normalize,
                             const float* norm_w, float eps, bool rotate, int32_t pos,
                             const RopeParams& rope) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int i = lane; i < head_dim; i += 32) buf[i] = x[i];
  if (normalize) {
    // Each lane reads back only the values it wrote: no barrier before the sum.
    const double sum_squares = warp_sum(head_sum_squares_lane(buf, head_dim, lane));
    const float inv = rms_inverse(sum_squares, head_dim, eps);
    for (int i = lane; i < head_dim; i += 32) buf[i] = rms_apply(buf[i], inv, norm_w, i);
  }
  __syncwarp();
  if (rotate) {
    const int half = rope.n_rot / 2;
    for (int i = lane; i < half; i += 32) {
      int a, b;
      rope_pair(rope.style, half, i, &a, &b);
      rope_rotate(buf, a, b, pos, rope.inv_freq[i]);
    }
    __syncwarp();
  }
  for (int i = lane; i < head_dim; i += 32) out[i] = buf[i];
  __syncwarp();  // the buffer is read before the warp's next head overwrites it
}

__global__ void __launch_bounds__(32 * kPrepWarps)
    attn_prep_kernel(AttnPrep a, int n_q_blocks, int t0) {
  __shared__ float rows[kPrepWarps][kMaxHeadDim];
  const int t = t0 + static_cast<int>(blockIdx.y);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int d = a.head_dim;
  const int32_t pos = a.pos[t];
  if (static_cast<int>(blockIdx.x) < n_q_blocks) {
    const int h = static_cast<int>(blockIdx.x) * kPrepWarps + warp;
    if (h < a.n_head) {
      float* q = a.q + (static_cast<int64_t>(t) * a.n_head + h) * d;
      prepare_head(rows[warp], q, q, d, a.q_norm != nullptr, a.q_norm, a.eps, true, pos, a.rope);
    }
    return;
  }
  for (int g = warp; g < a.n_head_kv; g += kPrepWarps) {
    const int64_t head = (static_cast<int64_t>(t) * a.n_head_kv + g) * d;
    // V before K: when V is K's copy, it is the K before K's norm.
    if (a.v_from_k || a.v_norm) {
      prepare_head(rows[warp], (a.v_from_k ? a.k : a.v) + head, a.v + head, d, a.v_norm, nullptr,
                   a.eps, false, pos, a.rope);
    }
    prepare_head(rows[warp], a.k + head, a.k + head, d, a.k_norm != nullptr, a.k_norm, a.eps, true,
                 pos, a.rope);
  }
  __syncthreads();  // every head of the token's K and V before their rows are encoded
  const int kv_dim = a.n_head_kv * d;
  const KvWrite dst = a.dst[t];
  const float* k = a.k + static_cast<int64_t>(t) * kv_dim;
  const float* v = a.v + static_cast<int64_t>(t) * kv_dim;
  for (int item = threadIdx.x; item < cache_store_items(a.k_type, kv_dim); item += blockDim.x)
    store_cache_item(a.k_type, k, dst.k, item);
  for (int item = threadIdx.x; item < cache_store_items(a.v_type, kv_dim); item += blockDim.x)
    store_cache_item(a.v_type, v, dst.v, item);
}

}  // namespace

cudaError_t launch_attention(const AttentionBatch& batch, int n_sm, cudaStream_t stream) {
  if (batch.n_tokens <= 0 || batch.n_head <= 0) return cudaSuccess;
  if (batch.out_q8 != nullptr && !act_q8_fits(static_cast<int64_t>(batch.n_head) * batch.head_dim))
    return cudaErrorInvalidValue;
  if (batch.partials != nullptr && batch.n_tokens <= kActQ8MaxTokens)
    return launch_split_attention(batch, n_sm, stream);
  return launch_whole_attention(batch, stream);
}

cudaError_t launch_attn_prep(const AttnPrep& a, cudaStream_t stream) {
  if (a.n_tokens <= 0 || a.n_head <= 0) return cudaSuccess;
  if (a.head_dim <= 0 || a.head_dim > kMaxHeadDim) return cudaErrorInvalidValue;
  const int n_q_blocks = (a.n_head + kPrepWarps - 1) / kPrepWarps;
  const unsigned int grid_x = static_cast<unsigned int>(n_q_blocks + (a.k != nullptr ? 1 : 0));
  for (int t0 = 0; t0 < a.n_tokens; t0 += kMaxGridY) {
    const int nt = a.n_tokens - t0 < kMaxGridY ? a.n_tokens - t0 : kMaxGridY;
    attn_prep_kernel<<<dim3(grid_x, nt), 32 * kPrepWarps, 0, stream>>>(a, n_q_blocks, t0);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace kernels::cuda::detail
