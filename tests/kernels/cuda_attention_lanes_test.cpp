// The CUDA attention kernels' arithmetic (kernels/cuda/attention_lanes.h, cache_rows.h) run on the
// host, block by block, tile by tile and unit by unit as attention.cu runs it, against kernels::ref
// and the tensor:: codecs on random inputs. No GPU needed: these catch an indexing or layout bug
// (a chunk that skips a cell, a head served twice, a partial state read from the wrong place, a
// nibble decoded from the wrong byte) before a GPU ever runs the kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/act_q8.h"
#include "kernels/cuda/attention_lanes.h"
#include "kernels/cuda/cache_rows.h"
#include "kernels/ref/ref.h"
#include "tensor/dequantize.h"
#include "tensor/dtype.h"
#include "tensor/quantize.h"
#include "testing/testing.h"

namespace {

namespace cu = kernels::cuda;
using kernels::AttentionBatch;
using kernels::KvSpan;
using tensor::DType;

constexpr DType kCacheTypes[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0};

using testing_util::random_floats;

bool is_block_type(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0;
}

// Bytes whose start sits `offset` bytes past a 16-byte boundary (the loads choose their width by
// the address).
struct OffsetBytes {
  OffsetBytes(size_t n, size_t offset) : storage(n + 32) {
    const auto base = reinterpret_cast<uintptr_t>(storage.data());
    data = storage.data() + ((16 - base % 16) % 16) + offset;
  }
  std::vector<uint8_t> storage;
  uint8_t* data;
};

// --- Reading and writing cache rows ------------------------------------------------------------

TEST(CudaCacheRows, UnitsDecodeExactlyAsTheDequantizer) {
  constexpr int kDim = 256;
  for (DType type : kCacheTypes) {
    // 16-byte aligned rows take the wide loads, the others the narrow ones.
    for (size_t offset : {size_t{0}, size_t{2}, size_t{4}}) {
      if (type == DType::kF32 && offset == 2) continue;  // F32 rows are 4-byte aligned
      SCOPED_TRACE(testing::Message() << tensor::dtype_name(type) << " offset " << offset);
      auto values = random_floats(kDim, 11 + static_cast<uint32_t>(offset), 3.0f);
      values[5] = 6.0e-6f;  // an f16 subnormal
      values[77] = -1.0e-9f;
      OffsetBytes row(tensor::row_bytes(type, kDim), offset);
      ASSERT_TRUE(tensor::quantize_row(type, values.data(), row.data, kDim).ok());
      std::vector<float> expected(kDim);
      ASSERT_TRUE(tensor::dequantize_row(type, row.data, expected.data(), kDim).ok());
      for (int i = 0; i < kDim; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(cu::cache_value_at(type, row.data, i)),
                  std::bit_cast<uint32_t>(expected[i]))
            << "value " << i;
      }
      // Every start and length: whole aligned units (the wide path) and the rest (value by value).
      for (int i0 = 0; i0 < kDim; ++i0) {
        for (int n_valid = 1; n_valid <= 8 && i0 + n_valid <= kDim; ++n_valid) {
          float v[8];
          cu::load_cache_unit(type, row.data, i0, n_valid, v);
          for (int j = 0; j < 8; ++j) {
            const float want = j < n_valid ? expected[i0 + j] : 0.0f;
            ASSERT_EQ(std::bit_cast<uint32_t>(v[j]), std::bit_cast<uint32_t>(want))
                << "unit at " << i0 << " of " << n_valid << " values, value " << j;
          }
        }
      }
    }
  }
}

TEST(CudaCacheRows, StoresEncodeExactlyAsTheQuantizer) {
  constexpr int kDim = 512;
  for (DType type : kCacheTypes) {
    for (float sd : {1e-3f, 1.0f, 300.0f}) {
      SCOPED_TRACE(testing::Message() << tensor::dtype_name(type) << " sd " << sd);
      auto values = random_floats(kDim, 5, sd);
      for (int j = 32; j < 64; ++j) values[j] = 0.0f;  // a block of zeros: scale 0
      values[70] = 4.0f * sd;                          // a tie for the largest magnitude: Q4_0
      values[90] = -4.0f * sd;                         // takes the first one's sign
      values[100] = 0.5f * sd;
      const size_t bytes = tensor::row_bytes(type, kDim);
      std::vector<uint8_t> expected(bytes), got(bytes, 0xab);
      ASSERT_TRUE(tensor::quantize_row(type, values.data(), expected.data(), kDim).ok());
      for (int item = 0; item < cu::cache_store_items(type, kDim); ++item)
        cu::store_cache_item(type, values.data(), got.data(), item);
      EXPECT_EQ(got, expected);
    }
  }
}

// --- The split of the context --------------------------------------------------------------------

// Every tile of the cells belongs to one chunk, tile c to chunk c mod kAttnMaxSplits, whatever
// the number of cells: a chunk never changes which cells it adds as the cache grows.
TEST(CudaAttentionSplit, ChunksCoverEveryCellOnce) {
  std::vector<int> cell_counts;
  for (int n = 0; n <= 1100; ++n) cell_counts.push_back(n);
  for (int n : {4095, 4096, 4097, 32768, 131072 + 7, 1 << 20}) cell_counts.push_back(n);
  const int C = cu::kAttnTileCells;
  for (int n_cells : cell_counts) {
    const int n_chunks = cu::attn_chunk_count(n_cells);
    ASSERT_GE(n_chunks, 1);
    ASSERT_LE(n_chunks, kernels::kAttnMaxSplits);
    ASSERT_EQ(n_chunks, std::clamp((n_cells + C - 1) / C, 1, kernels::kAttnMaxSplits)) << n_cells;
    std::vector<int> seen(static_cast<size_t>(n_cells), 0);
    for (int chunk = 0; chunk < n_chunks; ++chunk) {
      for (int tile = cu::attn_chunk_first_cell(chunk); tile < n_cells;
           tile += cu::kAttnChunkStride) {
        ASSERT_EQ(tile / C % kernels::kAttnMaxSplits, chunk);
        for (int c = tile; c < std::min(n_cells, tile + C); ++c) ++seen[c];
      }
    }
    ASSERT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; })) << n_cells;
  }
}

TEST(CudaAttentionSplit, BlocksServeEveryQueryHeadAndChunkOnce) {
  for (int n_head = 1; n_head <= 72; ++n_head) {
    for (int n_head_kv = 1; n_head_kv <= n_head; ++n_head_kv) {
      if (n_head % n_head_kv != 0) continue;
      for (int n_tokens = 1; n_tokens <= kernels::kActQ8MaxTokens; ++n_tokens) {
        for (int n_sm : {1, 8, 108, 132, 144}) {
          SCOPED_TRACE(testing::Message() << n_head << " heads over " << n_head_kv << ", T "
                                          << n_tokens << ", " << n_sm << " SMs");
          const int blocks = cu::attn_blocks_per_token(n_tokens, n_head, n_sm);
          const cu::AttnSplitPlan plan = cu::attn_split_plan(blocks, n_head, n_head_kv);
          ASSERT_GE(plan.n_split, 1);
          ASSERT_LE(plan.n_split, kernels::kAttnMaxSplits);
          const int group = n_head / n_head_kv;
          constexpr int kChunks = kernels::kAttnMaxSplits;  // a long context's
          std::vector<int> served(static_cast<size_t>(n_head) * kChunks, 0);
          for (int block = 0; block < blocks; ++block) {
            const cu::AttnBlockWork w = cu::attn_block_work(plan, n_head_kv, block);
            if (!w.valid) continue;
            ASSERT_GE(w.n_heads, 1);
            ASSERT_LE(w.n_heads, cu::kAttnBlockHeads);
            ASSERT_LT(w.split, plan.n_split);
            for (int h = w.first_head; h < w.first_head + w.n_heads; ++h) {
              ASSERT_EQ(h / group, w.kv_head) << "query head " << h << " is not of its KV head";
              for (int chunk = w.split; chunk < kChunks; chunk += plan.n_split)
                ++served[static_cast<size_t>(h) * kChunks + chunk];
            }
          }
          for (size_t i = 0; i < served.size(); ++i)
            ASSERT_EQ(served[i], 1) << "query head " << i / kChunks << " chunk " << i % kChunks;
        }
      }
    }
  }
  // Gemma 4 E2B decoding one token on an H100: its one KV head gets the most chunks.
  const int e2b_blocks = cu::attn_blocks_per_token(1, 8, 132);
  EXPECT_EQ(cu::attn_split_plan(e2b_blocks, 8, 1).n_split, kernels::kAttnMaxSplits);
}

TEST(CudaAttentionSplit, TeamsCoverEveryValueOfAHead) {
  for (int head_dim = 1; head_dim <= 1024; ++head_dim) {
    const cu::AttnTeams t = cu::attn_teams(head_dim);
    ASSERT_EQ(t.units, (head_dim + 7) / 8) << head_dim;
    ASSERT_GE(t.team_size, t.units);
    ASSERT_EQ(t.team_size & (t.team_size - 1), 0) << "a team is a power of two: " << head_dim;
    ASSERT_GE(t.n_teams, 1);
    ASSERT_LE(t.n_teams * t.team_size, cu::kAttnThreads);
    ASSERT_LE(t.n_parts, cu::kAttnMaxParts);
    ASSERT_EQ(t.n_parts * 32 >= t.team_size && (t.n_parts - 1) * 32 < t.team_size, true);
  }
}

// --- Decode attention, chunk by chunk ------------------------------------------------------------

// A paged cache as kv::Cache lays it out: blocks of 16 cells holding random K/V rows in the given
// types; every 7th cell empty, positions rotated by 5 (as a ring leaves them).
struct Cache {
  std::vector<std::vector<uint8_t>> k_storage, v_storage;
  std::vector<const uint8_t*> k_blocks, v_blocks;
  std::vector<int32_t> pos;
  KvSpan span;

  Cache(DType k_type, DType v_type, int n_head_kv, int head_dim, int n_cells, uint32_t seed) {
    constexpr int kCellsPerBlock = 16;
    const int kv_dim = n_head_kv * head_dim;
    const size_t k_row = tensor::row_bytes(k_type, kv_dim),
                 v_row = tensor::row_bytes(v_type, kv_dim);
    const int n_blocks = (n_cells + kCellsPerBlock - 1) / kCellsPerBlock;
    for (int b = 0; b < n_blocks; ++b) {
      k_storage.emplace_back(k_row * kCellsPerBlock);
      v_storage.emplace_back(v_row * kCellsPerBlock);
    }
    const auto k = random_floats(static_cast<size_t>(n_cells) * kv_dim, seed);
    const auto v = random_floats(static_cast<size_t>(n_cells) * kv_dim, seed + 1);
    for (int c = 0; c < n_cells; ++c) {
      uint8_t* kd = k_storage[c / kCellsPerBlock].data() + (c % kCellsPerBlock) * k_row;
      uint8_t* vd = v_storage[c / kCellsPerBlock].data() + (c % kCellsPerBlock) * v_row;
      EXPECT_TRUE(tensor::quantize_row(k_type, k.data() + c * kv_dim, kd, kv_dim).ok());
      EXPECT_TRUE(tensor::quantize_row(v_type, v.data() + c * kv_dim, vd, kv_dim).ok());
      pos.push_back(c % 7 == 6 ? -1 : (c + 5) % n_cells);
    }
    for (auto& s : k_storage) k_blocks.push_back(s.data());
    for (auto& s : v_storage) v_blocks.push_back(s.data());
    span = {k_type,          v_type,          n_head_kv, head_dim, n_cells,   kCellsPerBlock,
            k_blocks.data(), v_blocks.data(), k_row,     v_row,    pos.data()};
  }
};

const uint8_t* cell_row(const uint8_t* const* blocks, int cells_per_block, size_t row_bytes,
                        int cell) {
  return blocks[cell / cells_per_block] + static_cast<size_t>(cell % cells_per_block) * row_bytes;
}

void run_chunk(const AttentionBatch& b, const cu::AttnBlockWork& work, int chunk, int t,
               std::vector<int>& written);

// Block `block` of token t of kernel 1 (attention.cu, attention_chunks_kernel), run on the host in
// the kernel's steps: tiles; per tile the teams' dot products by unit, the softmax of each head,
// and the teams' sums of weighted values; at the end the teams' sums in team order. Counts the
// states it writes in `written` ([T][n_head][kAttnMaxSplits]).
void run_chunk_block(const AttentionBatch& b, int blocks_per_token, int block, int t,
                     std::vector<int>& written) {
  const KvSpan& kv = *b.kv[t];
  const cu::AttnSplitPlan plan = cu::attn_split_plan(blocks_per_token, b.n_head, kv.n_head_kv);
  const cu::AttnBlockWork work = cu::attn_block_work(plan, kv.n_head_kv, block);
  if (!work.valid) return;
  const int n_chunks = cu::attn_chunk_count(kv.n_cells);
  for (int chunk = work.split; chunk < n_chunks; chunk += plan.n_split)
    run_chunk(b, work, chunk, t, written);
}

// One chunk of a block of kernel 1: its tiles, then its state.
void run_chunk(const AttentionBatch& b, const cu::AttnBlockWork& work, int chunk, int t,
               std::vector<int>& written) {
  const KvSpan& kv = *b.kv[t];
  const int d = b.head_dim, n_heads = work.n_heads;
  const cu::AttnTeams teams = cu::attn_teams(d);
  const int q_stride = teams.units * cu::kAttnUnit;
  const int32_t q_pos = b.pos[t];
  const int32_t from = b.attend_from ? b.attend_from[t] : q_pos;
  const int32_t until = b.attend_until ? b.attend_until[t] : q_pos;

  std::vector<float> rows(static_cast<size_t>(n_heads) * q_stride, 0.0f);
  for (int h = 0; h < n_heads; ++h) {
    const float* q = b.q + (static_cast<int64_t>(t) * b.n_head + work.first_head + h) * d;
    std::copy(q, q + d, rows.begin() + h * q_stride);
  }
  // acc[team][head][value]: each thread's registers, laid out by the values its unit covers.
  std::vector<float> acc(static_cast<size_t>(teams.n_teams) * n_heads * q_stride, 0.0f);
  std::vector<cu::SoftmaxRun> runs(n_heads);
  const int C = cu::kAttnTileCells;
  for (int tile = cu::attn_chunk_first_cell(chunk); tile < kv.n_cells;
       tile += cu::kAttnChunkStride) {
    const int n_tile = std::min(C, kv.n_cells - tile);
    // 1. Scores: the dot products of each unit, added within each warp of the team.
    std::vector<float> parts(static_cast<size_t>(cu::kAttnMaxParts) * n_heads * C, 0.0f);
    std::vector<bool> visible(C, false);
    for (int cc = 0; cc < n_tile; ++cc) {
      visible[cc] = kernels::key_visible(kv.cell_pos[tile + cc], q_pos, from, until, b.window);
      if (!visible[cc]) continue;
      const uint8_t* row = cell_row(kv.k_blocks, kv.cells_per_block, kv.k_row_bytes, tile + cc);
      for (int unit = 0; unit < teams.units; ++unit) {
        float k[8];
        cu::load_cache_unit(kv.k_type, row, work.kv_head * kv.head_dim + unit * 8,
                            std::min(8, d - unit * 8), k);
        for (int h = 0; h < n_heads; ++h) {
          float dot = 0.0f;
          for (int j = 0; j < 8; ++j) dot = std::fmaf(rows[h * q_stride + unit * 8 + j], k[j], dot);
          parts[(static_cast<size_t>(unit / 32) * n_heads + h) * C + cc] += dot;
        }
      }
    }
    // 2. Softmax per head.
    std::vector<float> weights(static_cast<size_t>(n_heads) * C), factors(n_heads);
    for (int h = 0; h < n_heads; ++h) {
      std::vector<float> s(C, -INFINITY);
      float tile_max = -INFINITY;
      for (int cc = 0; cc < n_tile; ++cc) {
        if (!visible[cc]) continue;
        float dot = parts[static_cast<size_t>(h) * C + cc];
        for (int p = 1; p < teams.n_parts; ++p)
          dot += parts[(static_cast<size_t>(p) * n_heads + h) * C + cc];
        s[cc] = dot * b.scale;
        tile_max = std::max(tile_max, s[cc]);
      }
      factors[h] = cu::softmax_advance(runs[h], tile_max);
      float sum = 0.0f;
      for (int cc = 0; cc < C; ++cc) {
        weights[static_cast<size_t>(h) * C + cc] = cu::softmax_weight(runs[h], s[cc]);
        sum += weights[static_cast<size_t>(h) * C + cc];
      }
      runs[h].l += sum;
    }
    // 3. Values: team cc % n_teams reads cell cc.
    for (int team = 0; team < teams.n_teams; ++team) {
      for (int h = 0; h < n_heads; ++h) {
        float* a = acc.data() + (static_cast<size_t>(team) * n_heads + h) * q_stride;
        for (int i = 0; i < q_stride; ++i) a[i] *= factors[h];
      }
    }
    for (int cc = 0; cc < n_tile; ++cc) {
      if (!visible[cc]) continue;
      const int team = cc % teams.n_teams;
      const uint8_t* row = cell_row(kv.v_blocks, kv.cells_per_block, kv.v_row_bytes, tile + cc);
      for (int unit = 0; unit < teams.units; ++unit) {
        float v[8];
        cu::load_cache_unit(kv.v_type, row, work.kv_head * kv.head_dim + unit * 8,
                            std::min(8, d - unit * 8), v);
        for (int h = 0; h < n_heads; ++h) {
          const float w = weights[static_cast<size_t>(h) * C + cc];
          float* a = acc.data() + (static_cast<size_t>(team) * n_heads + h) * q_stride + unit * 8;
          for (int j = 0; j < 8; ++j) a[j] = std::fmaf(w, v[j], a[j]);
        }
      }
    }
  }
  for (int h = 0; h < n_heads; ++h) {
    const int head = work.first_head + h;
    float* state = b.partials + cu::attn_partial_offset(t, b.n_head, head, chunk, d);
    for (int j = 0; j < d; ++j) {
      float sum = 0.0f;
      for (int team = 0; team < teams.n_teams; ++team)
        sum += acc[(static_cast<size_t>(team) * n_heads + h) * q_stride + j];
      state[j] = sum;
    }
    state[d] = runs[h].m;
    state[d + 1] = runs[h].l;
    ++written[(static_cast<size_t>(t) * b.n_head + head) * kernels::kAttnMaxSplits + chunk];
  }
}

// Kernel 2 (attention_combine_kernel) for every output value, after every block of kernel 1;
// checks each head's chunks were written exactly once.
void run_split_attention(const AttentionBatch& b, int n_sm) {
  const int blocks = cu::attn_blocks_per_token(b.n_tokens, b.n_head, n_sm);
  std::vector<int> written(static_cast<size_t>(b.n_tokens) * b.n_head * kernels::kAttnMaxSplits, 0);
  for (int t = 0; t < b.n_tokens; ++t)
    for (int block = 0; block < blocks; ++block) run_chunk_block(b, blocks, block, t, written);
  const int d = b.head_dim;
  for (int t = 0; t < b.n_tokens; ++t) {
    const KvSpan& kv = *b.kv[t];
    const int n_chunks = cu::attn_chunk_count(kv.n_cells);
    for (int h = 0; h < b.n_head; ++h) {
      for (int s = 0; s < kernels::kAttnMaxSplits; ++s) {
        ASSERT_EQ(written[(static_cast<size_t>(t) * b.n_head + h) * kernels::kAttnMaxSplits + s],
                  s < n_chunks ? 1 : 0)
            << "token " << t << " head " << h << " chunk " << s << " of " << n_chunks;
      }
      const float* head_partials = b.partials + cu::attn_partial_offset(t, b.n_head, h, 0, d);
      float* out = b.out + (static_cast<int64_t>(t) * b.n_head + h) * d;
      for (int j = 0; j < d; ++j) out[j] = cu::attn_combine_value(head_partials, n_chunks, d, j);
    }
  }
}

// The combination's 8-bit form as a warp writes it: lane i holds value i of a block; the maximum
// magnitude and the quants' sum are reduced across the lanes (here in the shuffle tree's order).
std::vector<uint8_t> warp_quantized_rows(const std::vector<float>& x, int64_t width, int n_rows) {
  std::vector<uint8_t> out(kernels::act_q8_row_bytes(width) * n_rows, 0);
  for (int r = 0; r < n_rows; ++r) {
    for (int64_t block = 0; block < width / 32; ++block) {
      const float* lanes = x.data() + r * width + block * 32;
      float amax[32];
      for (int lane = 0; lane < 32; ++lane) amax[lane] = std::fabs(lanes[lane]);
      int quant[32], sum[32];
      for (int offset = 16; offset > 0; offset /= 2) {
        float next[32];
        for (int lane = 0; lane < 32; ++lane) next[lane] = fmaxf(amax[lane], amax[lane ^ offset]);
        std::copy(next, next + 32, amax);
      }
      for (int lane = 0; lane < 32; ++lane)
        sum[lane] = quant[lane] = kernels::act_q8_quant(lanes[lane], amax[lane]);
      for (int offset = 16; offset > 0; offset /= 2) {
        int next[32];
        for (int lane = 0; lane < 32; ++lane) next[lane] = sum[lane] + sum[lane ^ offset];
        std::copy(next, next + 32, sum);
      }
      int8_t* q = kernels::act_q8_quants(out.data(), width, r) + block * 32;
      for (int lane = 0; lane < 32; ++lane) q[lane] = static_cast<int8_t>(quant[lane]);
      cu::act_q8_block_scales(amax[0], sum[0],
                              kernels::act_q8_scales(out.data(), width, r) + 2 * block);
    }
  }
  return out;
}

struct Shape {
  int n_head, n_head_kv, head_dim;
};

// Attention tolerance: the reference accumulates scores and sums in double over two passes; the
// kernels in f32, with one softmax update per tile and a final combination of up to 16 chunks.
// Outputs are weighted means of N(0, 1) values (|out| ≲ 3); f32 rounding over ≤ 1024-term dot
// products and ≤ 600-cell sums stays near 1e-6 (the sweep's worst error is printed). An indexing
// or layout error (a cell skipped or counted twice, a wrong chunk combined) moves an output by
// ~1e-2 or more.
constexpr float kAttentionTolerance = 2e-5f;

TEST(CudaAttentionSplit, ChunkByChunkMatchesTheReference) {
  // E2B sliding and full layers, a 31B-like group of 2, groups wider than a block (12 and 16
  // query heads per KV head), head sizes with a partial unit (12), tiny (8) and the largest (1024).
  const Shape shapes[] = {{8, 1, 256},  {8, 1, 512}, {16, 8, 256}, {12, 1, 64},
                          {32, 2, 128}, {8, 8, 12},  {4, 4, 8},    {2, 1, 1024}};
  float worst = 0.0f;
  int cases = 0;
  for (const Shape& shape : shapes) {
    for (DType k_type : kCacheTypes) {
      for (DType v_type : kCacheTypes) {
        const int kv_dim = shape.n_head_kv * shape.head_dim;
        if ((is_block_type(k_type) || is_block_type(v_type)) && kv_dim % 32 != 0) continue;
        // Every pair of types on E2B's sliding shape; on the others, K and V of one type.
        const bool e2b_sliding = &shape == &shapes[0];
        if (!e2b_sliding && k_type != v_type) continue;
        // Three sequences: long (chunks of many tiles), short (fewer chunks than splits) and one
        // that ends mid-tile; tokens of all three, one seeing past itself (an image).
        const uint32_t seed = static_cast<uint32_t>(shape.head_dim * 31 + cases);
        const Cache a(k_type, v_type, shape.n_head_kv, shape.head_dim, 600, seed);
        const Cache b(k_type, v_type, shape.n_head_kv, shape.head_dim, 21, seed + 7);
        const Cache c(k_type, v_type, shape.n_head_kv, shape.head_dim, 130, seed + 13);
        constexpr int kTokens = 4;
        const KvSpan* spans[kTokens] = {&a.span, &b.span, &c.span, &a.span};
        const int32_t pos[kTokens] = {598, 20, 100, 300};
        const int32_t from[kTokens] = {598, 20, 100, 280};  // the last token's image: 280–340
        const int32_t until[kTokens] = {598, 20, 100, 340};
        const int64_t width = static_cast<int64_t>(shape.n_head) * shape.head_dim;
        const auto q = random_floats(kTokens * width, seed + 99);
        for (int window : {0, 7, 300}) {
          std::vector<float> ref(kTokens * width);
          AttentionBatch batch{
              kTokens,  shape.n_head, shape.head_dim,
              q.data(), ref.data(),   pos,
              spans,    window,       1.0f / std::sqrt(static_cast<float>(shape.head_dim)),
              from,     until};
          kernels::ref::attention(batch);
          for (int n_sm : {132, 3}) {
            SCOPED_TRACE(testing::Message()
                         << shape.n_head << " heads over " << shape.n_head_kv << " of "
                         << shape.head_dim << ", K " << tensor::dtype_name(k_type) << " V "
                         << tensor::dtype_name(v_type) << ", window " << window << ", " << n_sm
                         << " SMs");
            std::vector<float> out(kTokens * width, -7.0f);
            std::vector<float> partials(static_cast<size_t>(kTokens) * shape.n_head *
                                            kernels::kAttnMaxSplits * (shape.head_dim + 2),
                                        std::numeric_limits<float>::quiet_NaN());
            batch.out = out.data();
            batch.partials = partials.data();
            run_split_attention(batch, n_sm);
            for (size_t i = 0; i < out.size(); ++i) {
              const float err = std::fabs(out[i] - ref[i]);
              worst = std::max(worst, err);
              ASSERT_LE(err, kAttentionTolerance * (1.0f + std::fabs(ref[i])))
                  << "at " << i << ": " << out[i] << " vs reference " << ref[i];
            }
            if (kernels::act_q8_fits(width)) {
              std::vector<uint8_t> expected(kernels::act_q8_row_bytes(width) * kTokens, 0);
              kernels::quantize_act_rows(out.data(), width, kTokens, expected.data());
              ASSERT_EQ(warp_quantized_rows(out, width, kTokens), expected);
            }
            ++cases;
          }
        }
      }
    }
  }
  std::printf("split attention: %d cases, worst |error| %.3g\n", cases, worst);
}

TEST(CudaAttentionSplit, NothingVisibleGivesZeros) {
  Cache cache(DType::kF16, DType::kQ8_0, 1, 64, 300, 3);
  std::fill(cache.pos.begin(), cache.pos.end(), 5000);  // every key is in the queries' future
  Cache empty(DType::kF16, DType::kQ8_0, 1, 64, 0, 4);  // no cells at all
  const KvSpan* spans[2] = {&cache.span, &empty.span};
  const int32_t pos[2] = {10, 0};
  const auto q = random_floats(2 * 2 * 64, 5);
  std::vector<float> out(q.size(), 1.0f);
  std::vector<float> partials(2 * 2 * kernels::kAttnMaxSplits * 66,
                              std::numeric_limits<float>::quiet_NaN());
  AttentionBatch batch{2, 2, 64, q.data(), out.data(), pos, spans, 0, 0.125f};
  batch.partials = partials.data();
  run_split_attention(batch, 132);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return v == 0.0f; }));
}

// A query's output is the same bits whatever else its step holds: alone over the cells up to its
// own, and as the first row of a verification step of five whose cache holds their cells too (and
// a sixth block of cells beyond), on grids of 132 and 3 SMs. Positions past 64·16 cells, so
// chunks hold several tiles.
TEST(CudaAttentionSplit, AQueryGivesTheSameBitsInEveryStep) {
  for (const Shape& shape : {Shape{8, 1, 256}, Shape{8, 2, 512}, Shape{32, 4, 128}}) {
    for (int q_pos : {40, 200, 1500}) {
      Cache cache(DType::kF16, DType::kF16, shape.n_head_kv, shape.head_dim, q_pos + 5 + 16, 11);
      std::iota(cache.pos.begin(), cache.pos.end(), 0);  // cell c holds position c
      const int64_t width = static_cast<int64_t>(shape.n_head) * shape.head_dim;
      const auto q = random_floats(5 * width, 17);
      auto run = [&](int n_tokens, int n_cells, int n_sm) {
        KvSpan span = cache.span;
        span.n_cells = n_cells;
        std::vector<const KvSpan*> spans(n_tokens, &span);
        std::vector<int32_t> pos(n_tokens);
        for (int i = 0; i < n_tokens; ++i) pos[i] = q_pos + i;
        std::vector<float> out(n_tokens * width),
            partials(static_cast<size_t>(n_tokens) * shape.n_head * kernels::kAttnMaxSplits *
                     (shape.head_dim + 2));
        AttentionBatch b{n_tokens,   shape.n_head, shape.head_dim, q.data(),
                         out.data(), pos.data(),   spans.data(),   0,
                         0.0625f};
        b.partials = partials.data();
        run_split_attention(b, n_sm);
        return std::vector<float>(out.begin(), out.begin() + width);
      };
      SCOPED_TRACE(testing::Message() << shape.n_head << " heads over " << shape.n_head_kv << " of "
                                      << shape.head_dim << ", query at " << q_pos);
      const std::vector<float> alone = run(1, q_pos + 1, 132);
      for (int n_sm : {132, 3}) {
        EXPECT_EQ(run(5, q_pos + 5, n_sm), alone) << n_sm << " SMs";
        EXPECT_EQ(run(5, q_pos + 5 + 16, n_sm), alone) << n_sm << " SMs, a block more";
        EXPECT_EQ(run(1, q_pos + 5 + 16, n_sm), alone) << n_sm << " SMs, alone, a block more";
      }
    }
  }
}

// --- attn_prep -----------------------------------------------------------------------------------

// One warp's prepare_head (attention.cu) on the host: the lanes' sums of squares added in the
// shuffle tree's order, then the norm and RoPE of the lane functions.
void prepare_head(const float* x, float* out, int head_dim, bool normalize, const float* norm_w,
                  float eps, bool rotate, int32_t pos, const kernels::RopeParams& rope) {
  std::vector<float> buf(x, x + head_dim);
  if (normalize) {
    double sums[32];
    for (int lane = 0; lane < 32; ++lane)
      sums[lane] = cu::head_sum_squares_lane(buf.data(), head_dim, lane);
    for (int offset = 16; offset > 0; offset /= 2) {
      double next[32];
      for (int lane = 0; lane < 32; ++lane) next[lane] = sums[lane] + sums[lane ^ offset];
      std::copy(next, next + 32, sums);
    }
    const float inv = cu::rms_inverse(sums[0], head_dim, eps);
    for (int i = 0; i < head_dim; ++i) buf[i] = cu::rms_apply(buf[i], inv, norm_w, i);
  }
  if (rotate) {
    const int half = rope.n_rot / 2;
    for (int i = 0; i < half; ++i) {
      int a, b;
      cu::rope_pair(rope.style, half, i, &a, &b);
      cu::rope_rotate(buf.data(), a, b, pos, rope.inv_freq[i]);
    }
  }
  std::copy(buf.begin(), buf.end(), out);
}

// attn_prep_kernel's blocks on the host: q heads; then each token's V and K heads and its rows.
void run_attn_prep(const kernels::AttnPrep& a) {
  const int d = a.head_dim;
  for (int t = 0; t < a.n_tokens; ++t) {
    for (int h = 0; h < a.n_head; ++h) {
      float* q = a.q + (static_cast<int64_t>(t) * a.n_head + h) * d;
      prepare_head(q, q, d, a.q_norm != nullptr, a.q_norm, a.eps, true, a.pos[t], a.rope);
    }
    if (a.k == nullptr) continue;
    for (int g = 0; g < a.n_head_kv; ++g) {
      const int64_t head = (static_cast<int64_t>(t) * a.n_head_kv + g) * d;
      prepare_head((a.v_from_k ? a.k : a.v) + head, a.v + head, d, a.v_norm, nullptr, a.eps, false,
                   a.pos[t], a.rope);
      prepare_head(a.k + head, a.k + head, d, a.k_norm != nullptr, a.k_norm, a.eps, true, a.pos[t],
                   a.rope);
    }
    const int kv_dim = a.n_head_kv * d;
    for (int item = 0; item < cu::cache_store_items(a.k_type, kv_dim); ++item)
      cu::store_cache_item(a.k_type, a.k + t * kv_dim, a.dst[t].k, item);
    for (int item = 0; item < cu::cache_store_items(a.v_type, kv_dim); ++item)
      cu::store_cache_item(a.v_type, a.v + t * kv_dim, a.dst[t].v, item);
  }
}

// The lanes reproduce the composed reference (rmsnorm, rope, store_kv) bit for bit: the same float
// operations in the same order, save the order of the double sum of squares, whose last bits
// almost never reach the f32 inverse (the sweep checks they do not here).
TEST(CudaAttnPrep, LanesMatchTheComposedReference) {
  struct Case {
    int n_head, n_head_kv, head_dim, n_rot;
    kernels::RopeStyle style;
    bool q_norm, k_norm, v_from_k, v_norm, kv_shared;
    DType k_type, v_type;
  };
  using kernels::RopeStyle;
  const Case cases[] = {
      // Gemma 4 sliding (norms, rotate-half RoPE over all dims) and full layers (K = V, partial
      // RoPE over a quarter of the dims), a KV-shared layer, llama (no norms, adjacent pairs).
      {8, 1, 256, 256, RopeStyle::kRotateHalf, true, true, false, true, false, DType::kF16,
       DType::kF16},
      {8, 1, 512, 128, RopeStyle::kRotateHalf, true, true, true, true, false, DType::kQ8_0,
       DType::kQ4_0},
      {8, 2, 256, 256, RopeStyle::kRotateHalf, true, false, false, false, true, DType::kF32,
       DType::kF32},
      {32, 8, 128, 128, RopeStyle::kAdjacent, false, false, false, false, false, DType::kQ4_0,
       DType::kQ8_0},
      {12, 12, 64, 32, RopeStyle::kAdjacent, true, true, false, true, false, DType::kF32,
       DType::kF16},
  };
  kernels::ref::RefBackend ref;
  for (const Case& c : cases) {
    for (int n_tokens : {1, 5}) {
      SCOPED_TRACE(testing::Message()
                   << c.n_head << "/" << c.n_head_kv << " heads of " << c.head_dim << ", K "
                   << tensor::dtype_name(c.k_type) << " V " << tensor::dtype_name(c.v_type)
                   << ", T " << n_tokens);
      const int d = c.head_dim, kv_dim = c.n_head_kv * d;
      const auto q0 = random_floats(static_cast<size_t>(n_tokens) * c.n_head * d, 1, 2.0f);
      const auto k0 = random_floats(static_cast<size_t>(n_tokens) * kv_dim, 2, 2.0f);
      const auto v0 = random_floats(static_cast<size_t>(n_tokens) * kv_dim, 3, 2.0f);
      auto q_norm = random_floats(d, 4), k_norm = random_floats(d, 5);
      std::vector<float> inv_freq(c.n_rot / 2);
      for (int i = 0; i < c.n_rot / 2; ++i)
        inv_freq[i] =
            std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(c.n_rot));
      std::vector<int32_t> pos(n_tokens);
      for (int t = 0; t < n_tokens; ++t) pos[t] = 3 + 977 * t;

      struct Run {
        std::vector<float> q, k, v;
        std::vector<std::vector<uint8_t>> k_rows, v_rows;
        std::vector<kernels::KvWrite> dst;
      };
      const auto make_run = [&] {
        Run r{q0, k0, v0, {}, {}, {}};
        for (int t = 0; t < n_tokens; ++t) {
          r.k_rows.emplace_back(tensor::row_bytes(c.k_type, kv_dim), 0);
          r.v_rows.emplace_back(tensor::row_bytes(c.v_type, kv_dim), 0);
        }
        for (int t = 0; t < n_tokens; ++t)
          r.dst.push_back({r.k_rows[t].data(), r.v_rows[t].data()});
        return r;
      };
      const auto args = [&](Run& r) {
        kernels::AttnPrep a;
        a.n_tokens = n_tokens;
        a.n_head = c.n_head;
        a.n_head_kv = c.n_head_kv;
        a.head_dim = d;
        a.eps = 1e-6f;
        a.q = r.q.data();
        a.q_norm = c.q_norm ? q_norm.data() : nullptr;
        a.k = c.kv_shared ? nullptr : r.k.data();
        a.k_norm = c.k_norm ? k_norm.data() : nullptr;
        a.v = c.kv_shared ? nullptr : r.v.data();
        a.v_from_k = c.v_from_k;
        a.v_norm = c.v_norm;
        a.pos = pos.data();
        a.rope = {c.style, c.n_rot, inv_freq.data()};
        a.k_type = c.k_type;
        a.v_type = c.v_type;
        a.dst = r.dst.data();
        return a;
      };
      Run expected = make_run(), got = make_run();
      ref.attn_prep(args(expected));
      run_attn_prep(args(got));
      EXPECT_EQ(got.q, expected.q);
      EXPECT_EQ(got.k, expected.k);
      EXPECT_EQ(got.v, expected.v);
      EXPECT_EQ(got.k_rows, expected.k_rows);
      EXPECT_EQ(got.v_rows, expected.v_rows);
      EXPECT_NE(got.q, q0) << "the sweep must change q";
    }
  }
}

}  // namespace
