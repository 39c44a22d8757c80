// The arithmetic that decides what the CUDA attention kernels (attention.cu) compute, in functions
// the host compiles too, so the CPU tests run it against kernels::ref
// (tests/kernels/cuda_attention_lanes_test.cpp).
//
// Decode attention is split over the context (AttentionBatch::partials). Kernel 1's grid is
// (blocks_per_token, T), chosen on the host from T, n_head and the GPU's SM count only; every
// block derives on the device, from the KvSpan it reads, which KV head, which query heads of its
// group and which chunks of the cells it handles (attn_split_plan, attn_block_work,
// attn_chunk_count). So a CUDA graph recorded at one context length replays correctly at another.
// A block reads each K/V row of its chunks once for all its query heads, keeps an online softmax
// (m, l, acc) per head and chunk and writes it to the partials; kernel 2 combines a head's chunks
// (attn_combine_value) and writes the output and its 8-bit form.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/act_q8.h"
#include "kernels/cuda/cache_rows.h"
#include "kernels/op_args.h"

namespace kernels::cuda {

// --- The split of kernel 1
// -------------------------------------------------------------------------

inline constexpr int kAttnThreads = 256;
// Values a thread decodes at once from a K/V row (16 bytes of f16).
inline constexpr int kAttnUnit = 8;
// Query heads one block serves: its accumulators are kAttnBlockHeads × kAttnUnit registers per
// thread. Larger GQA groups are served by several blocks, each reading the rows again.
inline constexpr int kAttnBlockHeads = 8;
// Cells scored together before their values are summed (one softmax update per tile).
inline constexpr int kAttnTileCells = 64;
// Threads that share one K/V row, in whole units: at most 128 (kMaxHeadDim 1024 / 8), so a row's
// dot product has at most 4 warp-sized parts.
inline constexpr int kAttnMaxParts = 4;
// More teams than this would only wait on each other when their sums are merged.
inline constexpr int kAttnMaxTeams = 32;

// Kernel 1's blocks per token: about two per SM over the batch, at least one per query head (which
// is at least one per (KV head, head subgroup)), at most kAttnMaxSplits per query head.
HR_HOST_DEVICE constexpr int attn_blocks_per_token(int n_tokens, int n_head, int n_sm) {
  const int wanted = (2 * n_sm + n_tokens - 1) / n_tokens;
  const int most = n_head * kAttnMaxSplits;
  return wanted < n_head ? n_head : wanted > most ? most : wanted;
}

struct AttnSplitPlan {
  int group = 1;            // query heads per KV head
  int n_sub = 1;            // blocks sharing a group's heads (each ≤ kAttnBlockHeads of them)
  int heads_per_block = 1;  // the group's heads per subgroup (the last may have fewer)
  int n_split = 1;          // blocks per (KV head, subgroup), each serving every n_split-th chunk
};

// How a token's blocks_per_token blocks divide its work; n_head_kv is read on the device.
HR_HOST_DEVICE constexpr AttnSplitPlan attn_split_plan(int blocks_per_token, int n_head,
                                                       int n_head_kv) {
  AttnSplitPlan p;
  p.group = n_head / n_head_kv;
  p.n_sub = (p.group + kAttnBlockHeads - 1) / kAttnBlockHeads;
  p.heads_per_block = (p.group + p.n_sub - 1) / p.n_sub;
  const int split = blocks_per_token / (n_head_kv * p.n_sub);
  p.n_split = split < 1 ? 1 : split > kAttnMaxSplits ? kAttnMaxSplits : split;
  return p;
}

struct AttnBlockWork {
  bool valid = false;  // false: a block past the plan's work, which returns at once
  int kv_head = 0;
  int first_head = 0;  // query heads [first_head, first_head + n_heads)
  int n_heads = 0;
  int split = 0;  // its chunks: split, split + n_split, … (below attn_chunk_count)
};

// Block `block` of a token: consecutive blocks take the chunks of one (KV head, subgroup).
HR_HOST_DEVICE constexpr AttnBlockWork attn_block_work(const AttnSplitPlan& p, int n_head_kv,
                                                       int block) {
  AttnBlockWork w;
  if (block >= n_head_kv * p.n_sub * p.n_split) return w;
  w.split = block % p.n_split;
  const int unit = block / p.n_split;
  const int sub = unit % p.n_sub;
  w.kv_head = unit / p.n_sub;
  const int first_in_group = sub * p.heads_per_block;
  const int left = p.group - first_in_group;
  w.n_heads = left < p.heads_per_block ? left : p.heads_per_block;
  w.first_head = w.kv_head * p.group + first_in_group;
  w.valid = w.n_heads > 0;
  return w;
}

// The chunks of a context of n_cells cells: tile c (cells [c·kAttnTileCells, (c+1)·kAttnTileCells))
// belongs to chunk c mod kAttnMaxSplits. So which cells a chunk holds, the order it adds them in,
// and the state a query reaches in it depend on neither the cells the cache holds past the query
// nor the grid (T, SMs): a row's output is the same bits in a step of one token as in a
// verification step of several, whose cache holds the drafts' cells too. (Cutting the cells into
// n_split equal ranges moved the chunks' borders with n_cells, and a verification step's greedy
// picks then differed from plain decoding's at near-ties: bench/RESULTS.md, 2026-11-28 H200 run.)
// The count: one chunk per tile up to kAttnMaxSplits, one when there are no cells (its state says
// "nothing visible").
HR_HOST_DEVICE constexpr int attn_chunk_count(int n_cells) {
  const int tiles = (n_cells + kAttnTileCells - 1) / kAttnTileCells;
  return tiles < 1 ? 1 : tiles < kAttnMaxSplits ? tiles : kAttnMaxSplits;
}

// The first cell of chunk `chunk`'s tiles, and the distance between them.
HR_HOST_DEVICE constexpr int attn_chunk_first_cell(int chunk) {
  return chunk * kAttnTileCells;
}
inline constexpr int kAttnChunkStride = kAttnMaxSplits * kAttnTileCells;

// How kernel 1's threads share a row: a team of team_size threads (a power of two) reads one row,
// thread u of the team the values [8u, 8u + 8) of the head; n_teams teams read different cells.
struct AttnTeams {
  int units = 1;      // 8-value units of a head (the last may be partial)
  int team_size = 1;  // threads per team, ≥ units; teams of ≤ 32 lie inside one warp
  int n_teams = 1;
  int n_parts = 1;  // warps a team spans: the parts of its dot products
};

HR_HOST_DEVICE constexpr AttnTeams attn_teams(int head_dim) {
  AttnTeams t;
  t.units = (head_dim + kAttnUnit - 1) / kAttnUnit;
  while (t.team_size < t.units) t.team_size *= 2;
  const int teams = kAttnThreads / t.team_size;
  t.n_teams = teams < kAttnMaxTeams ? teams : kAttnMaxTeams;
  t.n_parts = (t.team_size + 31) / 32;
  return t;
}

// --- Online softmax
// -------------------------------------------------------------------------------

// The softmax state of one query head over the cells seen so far: the largest score m, and
// l = Σ exp(s − m) (the accumulator acc = Σ exp(s − m) · v lives beside it).
struct SoftmaxRun {
  float m = -INFINITY;
  float l = 0.0f;
};

// Moves the state to the maximum of a new tile's scores; returns the factor by which l (already
// applied) and acc must be rescaled. Nothing visible so far: the factor is 0 (l and acc are 0).
HR_HOST_DEVICE inline float softmax_advance(SoftmaxRun& run, float tile_max) {
  const float m_new = fmaxf(run.m, tile_max);
  const float factor = run.m == -INFINITY ? 0.0f : expf(run.m - m_new);
  run.l *= factor;
  run.m = m_new;
  return factor;
}

// The weight of score s (−inf: an invisible cell) after softmax_advance.
HR_HOST_DEVICE inline float softmax_weight(const SoftmaxRun& run, float s) {
  return s == -INFINITY ? 0.0f : expf(s - run.m);
}

// --- The partial states (AttentionBatch::partials) and their combination -------------------------

// Floats of one chunk's state of one query head: acc[head_dim], then m, then l.
HR_HOST_DEVICE constexpr int attn_partial_stride(int head_dim) {
  return head_dim + 2;
}

// Where chunk `split` of query head `head` of token t starts: [T][n_head][kAttnMaxSplits][stride].
HR_HOST_DEVICE constexpr int64_t attn_partial_offset(int t, int n_head, int head, int split,
                                                     int head_dim) {
  return ((static_cast<int64_t>(t) * n_head + head) * kAttnMaxSplits + split) *
         attn_partial_stride(head_dim);
}

// Output value d of a query head from its chunks' states (head_partials: its chunk 0):
// Σ_s acc_s[d]·e^(m_s − M) / Σ_s l_s·e^(m_s − M) with M = max m_s; 0 when nothing was visible.
HR_HOST_DEVICE inline float attn_combine_value(const float* head_partials, int n_chunks,
                                               int head_dim, int d) {
  const int stride = attn_partial_stride(head_dim);
  float m_max = -INFINITY;
  for (int s = 0; s < n_chunks; ++s) m_max = fmaxf(m_max, head_partials[s * stride + head_dim]);
  if (m_max == -INFINITY) return 0.0f;
  float sum = 0.0f, value = 0.0f;
  for (int s = 0; s < n_chunks; ++s) {
    const float* state = head_partials + s * stride;
    const float m = state[head_dim];
    if (m == -INFINITY) continue;  // a chunk that saw nothing
    const float factor = expf(m - m_max);
    sum = fmaf(state[head_dim + 1], factor, sum);
    value = fmaf(state[d], factor, value);
  }
  return value / sum;
}

// The (d, s) pair of an 8-bit activation block (act_q8.h) from its largest magnitude and the sum of
// its quants, which a warp reduces across its lanes: quantize_act_block's arithmetic.
HR_HOST_DEVICE inline void act_q8_block_scales(float amax, int quant_sum, float* scales) {
  scales[0] = amax / 127.0f;
  scales[1] = scales[0] * static_cast<float>(quant_sum);
}

// --- attn_prep: a head's RMSNorm and RoPE (kernels::ref's arithmetic) ----------------------------

// Lane `lane`'s share of a head's sum of squares (values lane, lane + 32, …), in double as the
// reference; a warp adds the 32 shares.
HR_HOST_DEVICE inline double head_sum_squares_lane(const float* x, int n, int lane) {
  double sum = 0;
  for (int i = lane; i < n; i += 32) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

HR_HOST_DEVICE inline float rms_inverse(double sum_squares, int n, float eps) {
  return static_cast<float>(1.0 / sqrt(sum_squares / static_cast<double>(n) + eps));
}

// x · inv · w[i] (w null: 1), rounded as the reference's left-to-right product.
HR_HOST_DEVICE inline float rms_apply(float x, float inv, const float* w, int i) {
  return mul_rn(mul_rn(x, inv), w != nullptr ? w[i] : 1.0f);
}

// The two dims pair i of a head turns: adjacent (2i, 2i+1) or rotate-half (i, i + n_rot/2).
HR_HOST_DEVICE inline void rope_pair(RopeStyle style, int half, int i, int* a, int* b) {
  *a = style == RopeStyle::kAdjacent ? 2 * i : i;
  *b = style == RopeStyle::kAdjacent ? 2 * i + 1 : i + half;
}

// Turns (x[a], x[b]) by the angle pos · inv_freq (in double, then rounded, as the reference).
HR_HOST_DEVICE inline void rope_rotate(float* x, int a, int b, int32_t pos, float inv_freq) {
  const double angle = static_cast<double>(pos) * inv_freq;
  const float c = static_cast<float>(cos(angle));
  const float s = static_cast<float>(sin(angle));
  const float x0 = x[a], x1 = x[b];
  x[a] = sub_rn(mul_rn(x0, c), mul_rn(x1, s));
  x[b] = add_rn(mul_rn(x1, c), mul_rn(x0, s));
}

}  // namespace kernels::cuda
