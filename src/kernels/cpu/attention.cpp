// CpuBackend::attention: one pass over the cache per work item — a token and a group of the query
// heads that share a KV head — with an online softmax per head (running maximum and sum), in
// chunks of 16 cells (one storage block):
//   1. scores of the chunk's visible cells, q·k decoded from the stored K row in registers;
//   2. if the chunk raises a head's maximum, rescale its running sum and accumulator once;
//   3. weights e^(s − max) for the chunk (vector exp), then acc += w·v decoded from V likewise.
// Each head's arithmetic runs in cell order whatever its group: results depend on neither batch
// nor threads.
//
// The AVX2 path reads f32/f16/q8_0/q4_0 rows in place: f16 through F16C, q8_0/q4_0 one 32-value
// block at a time (int8 → f32 in registers, block scale applied once per block). It needs the
// head's slice of a row to cover whole blocks (head_dim a multiple of 8, or of 32 for q8_0 and
// q4_0); otherwise — and without AVX2 — the portable path decodes the blocks covering the head
// into a buffer on the stack. With AVX-512 (head_dim a multiple of 16) rows are read 16 lanes at a
// time, each K and V row converted once for all the heads of a work item, whose query tokens are
// a tile of a prefill's as well as a decode token: the same softmax, the same bits as head by head
// (TileTask).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/backend.h"
#include "kernels/cpu/simd.h"
#include "tensor/blocks.h"
#include "tensor/dequantize.h"
#include "tensor/fp16.h"

namespace kernels::cpu {
namespace {

constexpr int kMaxHeadDim = 1024;  // model::kMaxHeadDim: the kernels sit below model
constexpr int kMaxBlock = 32;  // values per block of the cache types (f32/f16: 1, q8_0/q4_0: 32)
constexpr int kChunk = 16;     // cells per softmax step (kv::Cache's block)
constexpr int kMaxGroup = 8;   // query heads attended together over one read of their KV head
constexpr int kMaxTile = 16;   // with AVX-512, query heads of a tile of tokens likewise

// Cell c's K and V rows.
const uint8_t* k_row(const KvSpan& kv, int c) {
  return kv.k_blocks[c / kv.cells_per_block] +
         static_cast<size_t>(c % kv.cells_per_block) * kv.k_row_bytes;
}
const uint8_t* v_row(const KvSpan& kv, int c) {
  return kv.v_blocks[c / kv.cells_per_block] +
         static_cast<size_t>(c % kv.cells_per_block) * kv.v_row_bytes;
}

// One (token, head) of the batch — or, from q and out, the next heads of that token sharing its KV
// head: what every path needs.
struct HeadTask {
  const KvSpan& kv;
  const float* q;  // [head_dim] (per head of a group, consecutive)
  float* out;      // [head_dim] (likewise)
  int first;       // offset of this head's KV head in a cache row, in values
  int d;           // head_dim
  int32_t q_pos;
  int32_t from, until;  // its image's first and last positions (q_pos outside images)
  int window;
  float scale;

  bool visible(int c) const {
    const int32_t p = kv.cell_pos[c];
    return key_visible(p, q_pos, from, until, window);
  }
};

// Dequantizes the values [first, first + count) of a cache row into `buffer`, decoding only the
// blocks that cover them. Returns a pointer to value `first`.
const float* head_slice(DType type, const uint8_t* row, int first, int count, float* buffer) {
  const int block = static_cast<int>(tensor::block_values(type));
  const int b0 = first / block, b1 = (first + count + block - 1) / block;
  const uint8_t* src = row + tensor::row_bytes(type, static_cast<int64_t>(b0) * block);
  // Cache types are checked when the cache is planned (kv::check_cache_type): always decodable.
  (void)tensor::dequantize_row(type, src, buffer, static_cast<int64_t>(b1 - b0) * block);
  return buffer + (first - b0 * block);
}

// The portable path: the same chunked online softmax in scalar code.
void attend_portable(const HeadTask& h) {
  float k_buffer[kMaxHeadDim + 2 * kMaxBlock], v_buffer[kMaxHeadDim + 2 * kMaxBlock],
      acc[kMaxHeadDim] = {};
  float max_score = -std::numeric_limits<float>::infinity(), sum = 0.0f;
  for (int c0 = 0; c0 < h.kv.n_cells; c0 += kChunk) {
    const int c1 = std::min(h.kv.n_cells, c0 + kChunk);
    float score[kChunk];
    int cell[kChunk], n = 0;
    float chunk_max = -std::numeric_limits<float>::infinity();
    for (int c = c0; c < c1; ++c) {
      if (!h.visible(c)) continue;
      const float* k = head_slice(h.kv.k_type, k_row(h.kv, c), h.first, h.d, k_buffer);
      float dot = 0.0f;
      for (int i = 0; i < h.d; ++i) dot += h.q[i] * k[i];
      score[n] = dot * h.scale;
      chunk_max = std::max(chunk_max, score[n]);
      cell[n++] = c;
    }
    if (n == 0) continue;
    if (chunk_max > max_score) {  // e^(−inf) = 0 on the first visible chunk
      const float correction = std::exp(max_score - chunk_max);
      for (int i = 0; i < h.d; ++i) acc[i] *= correction;
      sum *= correction;
      max_score = chunk_max;
    }
    for (int j = 0; j < n; ++j) {
      const float weight = std::exp(score[j] - max_score);
      sum += weight;
      const float* v = head_slice(h.kv.v_type, v_row(h.kv, cell[j]), h.first, h.d, v_buffer);
      for (int i = 0; i < h.d; ++i) acc[i] += weight * v[i];
    }
  }
  for (int i = 0; i < h.d; ++i) h.out[i] = sum > 0.0f ? acc[i] / sum : 0.0f;
}

#if HR_HAS_AVX2_PATH
namespace avx2 {

// Readers of one head's slice of a cache row (the slice covers whole blocks): dot(q, row) and
// acc += w·row, decoding in registers.
struct F32Row {
  HR_AVX2 static float dot(const float* q, const uint8_t* row, int first, int d) {
    const float* k = reinterpret_cast<const float*>(row) + first;
    __m256 s = _mm256_setzero_ps();
    for (int i = 0; i < d; i += 8)
      s = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), s);
    return simd::hsum(s);
  }
  HR_AVX2 static void axpy(float* acc, float w, const uint8_t* row, int first, int d) {
    const float* v = reinterpret_cast<const float*>(row) + first;
    const __m256 vw = _mm256_set1_ps(w);
    for (int i = 0; i < d; i += 8)
      _mm256_storeu_ps(acc + i,
                       _mm256_fmadd_ps(vw, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
  }
};

HR_AVX2 inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

struct F16Row {
  HR_AVX2 static float dot(const float* q, const uint8_t* row, int first, int d) {
    const uint16_t* k = reinterpret_cast<const uint16_t*>(row) + first;
    __m256 s = _mm256_setzero_ps();
    for (int i = 0; i < d; i += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_f16(k + i), s);
    return simd::hsum(s);
  }
  HR_AVX2 static void axpy(float* acc, float w, const uint8_t* row, int first, int d) {
    const uint16_t* v = reinterpret_cast<const uint16_t*>(row) + first;
    const __m256 vw = _mm256_set1_ps(w);
    for (int i = 0; i < d; i += 8)
      _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, load_f16(v + i), _mm256_loadu_ps(acc + i)));
  }
};

// 8 signed bytes → 8 floats.
HR_AVX2 inline __m256 i8_to_f32(__m128i bytes) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

// A 32-value block as four groups of 8 signed integers (as floats), and its scale.
struct Q8_0Row {
  using Block = tensor::BlockQ8_0;
  HR_AVX2 static void decode(const Block& b, __m256 v[4]) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16));
    v[0] = i8_to_f32(lo);
    v[1] = i8_to_f32(_mm_srli_si128(lo, 8));
    v[2] = i8_to_f32(hi);
    v[3] = i8_to_f32(_mm_srli_si128(hi, 8));
  }
};

// q4_0: value j < 16 is the low nibble of qs[j], value j ≥ 16 the high nibble of qs[j − 16],
// both minus 8.
struct Q4_0Row {
  using Block = tensor::BlockQ4_0;
  HR_AVX2 static void decode(const Block& b, __m256 v[4]) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i nibble = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(packed, nibble), eight);
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), nibble), eight);
    v[0] = i8_to_f32(lo);
    v[1] = i8_to_f32(_mm_srli_si128(lo, 8));
    v[2] = i8_to_f32(hi);
    v[3] = i8_to_f32(_mm_srli_si128(hi, 8));
  }
};

// dot and axpy for the 32-value block formats: Σ_blocks d_b · (q_b · k_b), acc += (w·d_b)·v_b.
template <class Format>
struct BlockRow {
  using Block = typename Format::Block;
  HR_AVX2 static float dot(const float* q, const uint8_t* row, int first, int d) {
    const Block* blocks = reinterpret_cast<const Block*>(row) + first / 32;
    __m256 s = _mm256_setzero_ps();
    for (int b = 0; b < d / 32; ++b) {
      __m256 k[4];
      Format::decode(blocks[b], k);
      const float* qb = q + 32 * b;
      __m256 block_dot = _mm256_mul_ps(_mm256_loadu_ps(qb), k[0]);
      block_dot = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 8), k[1], block_dot);
      block_dot = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 16), k[2], block_dot);
      block_dot = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 24), k[3], block_dot);
      s = _mm256_fmadd_ps(block_dot, _mm256_set1_ps(_cvtsh_ss(blocks[b].d)), s);
    }
    return simd::hsum(s);
  }
  HR_AVX2 static void axpy(float* acc, float w, const uint8_t* row, int first, int d) {
    const Block* blocks = reinterpret_cast<const Block*>(row) + first / 32;
    for (int b = 0; b < d / 32; ++b) {
      __m256 v[4];
      Format::decode(blocks[b], v);
      const __m256 wd = _mm256_set1_ps(w * _cvtsh_ss(blocks[b].d));
      float* a = acc + 32 * b;
      for (int j = 0; j < 4; ++j)
        _mm256_storeu_ps(a + 8 * j, _mm256_fmadd_ps(wd, v[j], _mm256_loadu_ps(a + 8 * j)));
    }
  }
};

// A chunk's K rows against a group's queries, and a chunk's V rows into a group's accumulators,
// row by row (each row decoded while it is in L1 for every head of the group), through a row
// reader's dot and axpy.
template <class Row>
struct Chunk {
  HR_AVX2 static void scores(const float* const* q, int n_heads, const uint8_t* const* rows, int n,
                             int first, int d, float scale, float (*score)[kChunk]) {
    for (int j = 0; j < n; ++j) {
      for (int g = 0; g < n_heads; ++g) score[g][j] = Row::dot(q[g], rows[j], first, d) * scale;
    }
  }
  HR_AVX2 static void accumulate(float (*acc)[kMaxHeadDim], int n_heads, const uint8_t* const* rows,
                                 int n, const float (*weight)[kChunk], int first, int d) {
    for (int j = 0; j < n; ++j) {
      for (int g = 0; g < n_heads; ++g) Row::axpy(acc[g], weight[g][j], rows[j], first, d);
    }
  }
};

// The heads of one token that share a KV head, attended together: each cell's visibility is
// decided once and each K and V row is decoded while it is in L1 for all of them (the cache of a
// long context is far larger than L2, so a head at a time read it from memory once per head).
// Each head's arithmetic is in the same order as alone, so results do not depend on the grouping.
template <class KChunk, class VChunk>
HR_AVX2 void attend(const HeadTask& h, int n_heads) {
  alignas(32) float acc[kMaxGroup][kMaxHeadDim];
  float max_score[kMaxGroup], sum[kMaxGroup];
  for (int g = 0; g < n_heads; ++g) {
    std::fill_n(acc[g], h.d, 0.0f);
    max_score[g] = -std::numeric_limits<float>::infinity();
    sum[g] = 0.0f;
  }
  const float* q[kMaxGroup];
  for (int g = 0; g < n_heads; ++g) q[g] = h.q + static_cast<int64_t>(g) * h.d;
  for (int c0 = 0; c0 < h.kv.n_cells; c0 += kChunk) {
    const int c1 = std::min(h.kv.n_cells, c0 + kChunk);
    int cell[kChunk], n = 0;
    for (int c = c0; c < c1; ++c) {
      if (h.visible(c)) cell[n++] = c;
    }
    if (n == 0) continue;
    alignas(32) float score[kMaxGroup][kChunk] = {};
    const uint8_t* rows[kChunk];
    for (int j = 0; j < n; ++j) rows[j] = k_row(h.kv, cell[j]);
    KChunk::scores(q, n_heads, rows, n, h.first, h.d, h.scale, score);
    // Lanes past n hold zeros; their weights are computed and never read.
    alignas(32) float weight[kMaxGroup][kChunk];
    for (int g = 0; g < n_heads; ++g) {
      const float chunk_max = *std::max_element(score[g], score[g] + n);
      if (chunk_max > max_score[g]) {  // e^(−inf) = 0 on the first visible chunk
        const float correction = std::exp(max_score[g] - chunk_max);
        const __m256 vc = _mm256_set1_ps(correction);
        for (int i = 0; i < h.d; i += 8)
          _mm256_store_ps(acc[g] + i, _mm256_mul_ps(vc, _mm256_load_ps(acc[g] + i)));
        sum[g] *= correction;
        max_score[g] = chunk_max;
      }
      const __m256 vmax = _mm256_set1_ps(max_score[g]);
      for (int j = 0; j < n; j += 8) {
        _mm256_store_ps(weight[g] + j,
                        simd::exp(_mm256_sub_ps(_mm256_load_ps(score[g] + j), vmax)));
      }
    }
    for (int j = 0; j < n; ++j) {
      rows[j] = v_row(h.kv, cell[j]);
      for (int g = 0; g < n_heads; ++g) sum[g] += weight[g][j];
    }
    VChunk::accumulate(acc, n_heads, rows, n, weight, h.first, h.d);
  }
  for (int g = 0; g < n_heads; ++g) {
    const __m256 inv = _mm256_set1_ps(sum[g] > 0.0f ? 1.0f / sum[g] : 0.0f);
    float* out = h.out + static_cast<int64_t>(g) * h.d;
    for (int i = 0; i < h.d; i += 8)
      _mm256_storeu_ps(out + i, _mm256_mul_ps(inv, _mm256_load_ps(acc[g] + i)));
  }
}

using AttendFn = void (*)(const HeadTask&, int n_heads);

// The kernel for a K/V type pair, or nullptr when there is none.
template <class KChunk>
AttendFn pick_v(DType v_type) {
  switch (v_type) {
    case DType::kF32:
      return attend<KChunk, Chunk<F32Row>>;
    case DType::kF16:
      return attend<KChunk, Chunk<F16Row>>;
    case DType::kQ8_0:
      return attend<KChunk, Chunk<BlockRow<Q8_0Row>>>;
    case DType::kQ4_0:
      return attend<KChunk, Chunk<BlockRow<Q4_0Row>>>;
    default:
      return nullptr;
  }
}

// The same, for a head size whose slice of a row the readers cover whole: 8 values for f32 and
// f16 rows, 32-value blocks for q8_0 and q4_0.
AttendFn pick(DType k_type, DType v_type, int head_dim) {
  auto covers = [&](DType t) {
    return head_dim % (t == DType::kF32 || t == DType::kF16 ? 8 : 32) == 0;
  };
  if (!covers(k_type) || !covers(v_type)) return nullptr;
  switch (k_type) {
    case DType::kF32:
      return pick_v<Chunk<F32Row>>(v_type);
    case DType::kF16:
      return pick_v<Chunk<F16Row>>(v_type);
    case DType::kQ8_0:
      return pick_v<Chunk<BlockRow<Q8_0Row>>>(v_type);
    case DType::kQ4_0:
      return pick_v<Chunk<BlockRow<Q4_0Row>>>(v_type);
    default:
      return nullptr;
  }
}

}  // namespace avx2

// AVX-512: query heads that share a KV head — a token's, or a run of a sequence's tokens' (a
// prefill's) — attend it together over one read of each chunk of K and V rows (TileTask).
HR_AVX512_BEGIN
namespace avx512 {

// Readers of 16 values of a cache row from value `at` (a multiple of 16) as floats: f16 through
// the conversion instruction, q8_0/q4_0 as integer × block scale (the dequantized values exactly).
struct F32Row {
  static __m512 load16(const uint8_t* row, int at) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + at);
  }
};

struct F16Row {
  static __m512 load16(const uint8_t* row, int at) {
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * static_cast<size_t>(at))));
  }
};

inline __m512 scaled(__m128i bytes, uint16_t scale) {
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)),
                       _mm512_set1_ps(_cvtsh_ss(scale)));
}

struct Q8_0Row {
  static __m512 load16(const uint8_t* row, int at) {
    const auto& b = reinterpret_cast<const tensor::BlockQ8_0*>(row)[at / 32];
    return scaled(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + at % 32)), b.d);
  }
};

// q4_0: value j < 16 is the low nibble of qs[j], value j ≥ 16 the high nibble of qs[j − 16],
// both minus 8.
struct Q4_0Row {
  static __m512 load16(const uint8_t* row, int at) {
    const auto& b = reinterpret_cast<const tensor::BlockQ4_0*>(row)[at / 32];
    __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    if (at % 32 != 0) packed = _mm_srli_epi16(packed, 4);
    const __m128i nibbles = _mm_and_si128(packed, _mm_set1_epi8(0x0f));
    return scaled(_mm_sub_epi8(nibbles, _mm_set1_epi8(8)), b.d);
  }
};

// Lane j: the sum of v[j]'s 16 lanes, in hsum512's order (halves, quarters, then pairs), so a
// score has the bits of its dot product reduced alone; one transposed reduction for 16 rows.
inline __m512 hsum16(const __m512* v) {
  __m512 half[8], quarter[4], pair[2];
  for (int i = 0; i < 8; ++i) {  // 128-bit blocks 0+2 and 1+3 of rows 2i and 2i + 1
    half[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                            _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xee));
  }
  for (int i = 0; i < 4; ++i) {  // block k: row 4i + k's four partial sums
    quarter[i] = _mm512_add_ps(_mm512_shuffle_f32x4(half[2 * i], half[2 * i + 1], 0x88),
                               _mm512_shuffle_f32x4(half[2 * i], half[2 * i + 1], 0xdd));
  }
  for (int i = 0; i < 2; ++i) {
    pair[i] = _mm512_add_ps(_mm512_unpacklo_ps(quarter[2 * i], quarter[2 * i + 1]),
                            _mm512_unpackhi_ps(quarter[2 * i], quarter[2 * i + 1]));
  }
  const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(pair[0]), _mm512_castps_pd(pair[1]));
  const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(pair[0]), _mm512_castps_pd(pair[1]));
  const __m512 sums = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
  // Lane 4k + m now holds row k + 4m.
  return _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), sums);
}

// Up to kMaxTile query heads attending their KV heads together over one read of each chunk of
// rows: the heads of one token that share a KV head, or those of a run of consecutive tokens of
// one sequence; and the same for consecutive KV heads (a decode step's few work items then read
// whole stretches of each row rather than a head's slice). Each token sees its own cells of the
// chunk (key_visible). Head h is (KV head i, token, query head g), h = (i·n_tokens + token)·
// heads_per_token + g.
struct TileTask {
  const KvSpan& kv;
  int first;  // offset of the first KV head in a cache row, in values
  int d;      // head_dim
  int window;
  float scale;
  int n_kv;  // consecutive KV heads
  int n_tokens, heads_per_token;
  const float* q[kMaxTile];  // [head_dim] per head
  float* out[kMaxTile];
  int32_t q_pos[kMaxTile], from[kMaxTile], until[kMaxTile];  // per token

  int heads_per_kv() const { return n_tokens * heads_per_token; }
  int n_heads() const { return n_kv * heads_per_kv(); }
  int token_of(int h) const { return h % heads_per_kv() / heads_per_token; }
  bool visible(int token, int c) const {
    return key_visible(kv.cell_pos[c], q_pos[token], from[token], until[token], window);
  }
};

// Partial dot products of B heads' queries with R rows at once (the row read and converted once
// for the B heads, B·R independent sums): part[g][j] holds row j's 16 lane sums for head g, each
// lane adding in the order of a dot product alone.
template <class Row, int B, int R>
void dot_rows(const float* const* q, const uint8_t* const* rows, int first, int d,
              __m512 (*part)[kChunk], int j) {
  __m512 s[R][B];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < B; ++g) s[r][g] = _mm512_setzero_ps();
  }
  for (int i = 0; i < d; i += 16) {
    __m512 k[R];
    for (int r = 0; r < R; ++r) k[r] = Row::load16(rows[j + r], first + i);
    for (int g = 0; g < B; ++g) {
      const __m512 qv = _mm512_loadu_ps(q[g] + i);
      for (int r = 0; r < R; ++r) s[r][g] = _mm512_fmadd_ps(qv, k[r], s[r][g]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < B; ++g) part[g][j + r] = s[r][g];
  }
}

// Scores (q·k × scale) of B heads over a chunk's n rows; lanes past n hold 0.
template <class Row, int B>
void score_block(const float* const* q, const uint8_t* const* rows, int n, int first, int d,
                 float scale, float (*score)[kChunk]) {
  constexpr int R = 8 / B;  // 8 sums in flight: enough to hide the FMA latency
  alignas(64) __m512 part[B][kChunk];
  int j = 0;
  for (; j + R <= n; j += R) dot_rows<Row, B, R>(q, rows, first, d, part, j);
  for (; j < n; ++j) dot_rows<Row, B, 1>(q, rows, first, d, part, j);
  for (; j < kChunk; ++j) {
    for (int g = 0; g < B; ++g) part[g][j] = _mm512_setzero_ps();
  }
  for (int g = 0; g < B; ++g)
    _mm512_store_ps(score[g], _mm512_mul_ps(hsum16(part[g]), _mm512_set1_ps(scale)));
}

// Lanes [at, at + 16·W) of B heads' accumulators, in registers over a chunk's rows: each V row's
// slice converted once for the B heads, added where the head's token sees the cell (seen[g] bit
// j). Each lane adds the rows' terms in row order, as a head alone does.
template <class Row, int B, int W>
void accumulate_slice(float (*acc)[kMaxHeadDim], int at, const uint8_t* const* rows, int n,
                      const float (*weight)[kChunk], const __mmask16* seen, int first) {
  __m512 a[B][W];
  for (int g = 0; g < B; ++g) {
    for (int k = 0; k < W; ++k) a[g][k] = _mm512_load_ps(acc[g] + at + 16 * k);
  }
  for (int j = 0; j < n; ++j) {
    __m512 v[W];
    for (int k = 0; k < W; ++k) v[k] = Row::load16(rows[j], first + at + 16 * k);
    for (int g = 0; g < B; ++g) {
      const __m512 w = _mm512_set1_ps(weight[g][j]);
      const __mmask16 use = (seen[g] >> j & 1) != 0 ? 0xffff : 0;
      for (int k = 0; k < W; ++k) a[g][k] = _mm512_mask3_fmadd_ps(w, v[k], a[g][k], use);
    }
  }
  for (int g = 0; g < B; ++g) {
    for (int k = 0; k < W; ++k) _mm512_store_ps(acc[g] + at + 16 * k, a[g][k]);
  }
}

template <class Row, int B>
void accumulate_block(float (*acc)[kMaxHeadDim], const uint8_t* const* rows, int n,
                      const float (*weight)[kChunk], const __mmask16* seen, int first, int d) {
  constexpr int W = B <= 2 ? 8 : B <= 4 ? 4 : 2;  // 8 to 16 accumulators
  int at = 0;
  for (; at + 16 * W <= d; at += 16 * W)
    accumulate_slice<Row, B, W>(acc, at, rows, n, weight, seen, first);
  for (; at < d; at += 16) accumulate_slice<Row, B, 1>(acc, at, rows, n, weight, seen, first);
}

// n_heads (≤ kMaxTile) heads in register blocks of 8, 4, 2 and 1.
template <class Block>
void by_blocks(int n_heads, Block&& block) {
  int g = 0;
  while (n_heads - g >= 8) g += block(std::integral_constant<int, 8>{}, g);
  if (n_heads - g >= 4) g += block(std::integral_constant<int, 4>{}, g);
  if (n_heads - g >= 2) g += block(std::integral_constant<int, 2>{}, g);
  if (n_heads - g >= 1) block(std::integral_constant<int, 1>{}, g);
}

// Asks for the next chunk's K and V slices (from cell c) into L2 while this one is computed: the
// slices are a strided fraction of each row (the tile's KV heads'), which the hardware prefetchers
// follow poorly, and a decode step's cache comes from memory (a layer's is evicted by the next
// layers').
inline void prefetch_rows(const TileTask& t, int c) {
  const int64_t values = static_cast<int64_t>(t.n_kv) * t.d;
  const size_t from = tensor::row_bytes(t.kv.k_type, t.first);
  const size_t bytes = tensor::row_bytes(t.kv.k_type, values);
  const size_t v_from = tensor::row_bytes(t.kv.v_type, t.first);
  const size_t v_bytes = tensor::row_bytes(t.kv.v_type, values);
  for (const int end = std::min(t.kv.n_cells, c + kChunk); c < end; ++c) {
    const uint8_t* k = k_row(t.kv, c);
    const uint8_t* v = v_row(t.kv, c);
    for (size_t b = 0; b < bytes; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(k + from + b), _MM_HINT_T1);
    for (size_t b = 0; b < v_bytes; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(v + v_from + b), _MM_HINT_T1);
  }
}

// The chunked online softmax of attend() above, for a tile: per head the same operations in the
// same order as for the head alone (cells its token does not see get weight 0 and add nothing),
// so results do not depend on the tiling.
template <class KRow, class VRow>
void attend_tile(const TileTask& t) {
  const int n_heads = t.n_heads();
  alignas(64) float acc[kMaxTile][kMaxHeadDim];
  float max_score[kMaxTile], sum[kMaxTile];
  for (int g = 0; g < n_heads; ++g) {
    std::fill_n(acc[g], t.d, 0.0f);
    max_score[g] = -std::numeric_limits<float>::infinity();
    sum[g] = 0.0f;
  }
  for (int c0 = 0; c0 < t.kv.n_cells; c0 += kChunk) {
    const int c1 = std::min(t.kv.n_cells, c0 + kChunk);
    // The cells some token of the tile sees, and which of them each token sees.
    int cell[kChunk], n = 0;
    uint32_t sees[kMaxTile] = {};
    for (int c = c0; c < c1; ++c) {
      bool any = false;
      for (int token = 0; token < t.n_tokens; ++token) {
        if (!t.visible(token, c)) continue;
        sees[token] |= 1u << n;
        any = true;
      }
      if (any) cell[n++] = c;
    }
    if (n == 0) continue;
    prefetch_rows(t, c1);
    const uint8_t* rows[kChunk];
    for (int j = 0; j < n; ++j) rows[j] = k_row(t.kv, cell[j]);
    alignas(64) float score[kMaxTile][kChunk];
    for (int i = 0, h = 0; i < t.n_kv; ++i, h += t.heads_per_kv()) {
      by_blocks(t.heads_per_kv(), [&](auto b, int g) {
        score_block<KRow, decltype(b)::value>(t.q + h + g, rows, n, t.first + i * t.d, t.d, t.scale,
                                              score + h + g);
        return decltype(b)::value;
      });
    }
    alignas(64) float weight[kMaxTile][kChunk];
    __mmask16 seen[kMaxTile];
    for (int g = 0; g < n_heads; ++g) {
      seen[g] = static_cast<__mmask16>(sees[t.token_of(g)]);
      const __m512 s = _mm512_load_ps(score[g]);
      const float chunk_max = _mm512_reduce_max_ps(_mm512_mask_blend_ps(
          seen[g], _mm512_set1_ps(-std::numeric_limits<float>::infinity()), s));
      if (chunk_max > max_score[g]) {  // e^(−inf) = 0 on the first visible chunk
        const float correction = std::exp(max_score[g] - chunk_max);
        const __m512 vc = _mm512_set1_ps(correction);
        for (int i = 0; i < t.d; i += 16)
          _mm512_store_ps(acc[g] + i, _mm512_mul_ps(vc, _mm512_load_ps(acc[g] + i)));
        sum[g] *= correction;
        max_score[g] = chunk_max;
      }
      // attend()'s 8-lane exp, so that the weights have its bits.
      const __m256 vmax = _mm256_set1_ps(max_score[g]);
      const __m256 lo = simd::exp(_mm256_sub_ps(_mm512_castps512_ps256(s), vmax));
      const __m256 hi = simd::exp(
          _mm256_sub_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)), vmax));
      _mm256_store_ps(weight[g], lo);
      _mm256_store_ps(weight[g] + 8, hi);
      _mm512_store_ps(weight[g], _mm512_maskz_mov_ps(seen[g], _mm512_load_ps(weight[g])));
      for (int j = 0; j < n; ++j) sum[g] += weight[g][j];
    }
    for (int j = 0; j < n; ++j) rows[j] = v_row(t.kv, cell[j]);
    for (int i = 0, h = 0; i < t.n_kv; ++i, h += t.heads_per_kv()) {
      by_blocks(t.heads_per_kv(), [&](auto b, int g) {
        accumulate_block<VRow, decltype(b)::value>(acc + h + g, rows, n, weight + h + g,
                                                   seen + h + g, t.first + i * t.d, t.d);
        return decltype(b)::value;
      });
    }
  }
  for (int g = 0; g < n_heads; ++g) {
    const __m512 inv = _mm512_set1_ps(sum[g] > 0.0f ? 1.0f / sum[g] : 0.0f);
    for (int i = 0; i < t.d; i += 16)
      _mm512_storeu_ps(t.out[g] + i, _mm512_mul_ps(inv, _mm512_load_ps(acc[g] + i)));
  }
}

using TileFn = void (*)(const TileTask&);

template <class KRow>
TileFn pick_v(DType v_type) {
  switch (v_type) {
    case DType::kF32:
      return attend_tile<KRow, F32Row>;
    case DType::kF16:
      return attend_tile<KRow, F16Row>;
    case DType::kQ8_0:
      return attend_tile<KRow, Q8_0Row>;
    case DType::kQ4_0:
      return attend_tile<KRow, Q4_0Row>;
    default:
      return nullptr;
  }
}

// The kernel for a K/V type pair, or nullptr: heads whose slice of a row is whole 16-value groups.
TileFn pick(DType k_type, DType v_type, int head_dim) {
  if (head_dim % 16 != 0) return nullptr;
  switch (k_type) {
    case DType::kF32:
      return pick_v<F32Row>(v_type);
    case DType::kF16:
      return pick_v<F16Row>(v_type);
    case DType::kQ8_0:
      return pick_v<Q8_0Row>(v_type);
    case DType::kQ4_0:
      return pick_v<Q4_0Row>(v_type);
    default:
      return nullptr;
  }
}

}  // namespace avx512
HR_AVX512_END
#endif  // HR_HAS_AVX2_PATH

// The query heads of a work item: of each KV head in [kv_head, kv_head + n_kv), its heads
// [first, first + n_heads).
struct HeadRange {
  int kv_head, n_kv;
  int first, n_heads;
};

// A work item's heads for tokens [t0, t0 + n_tokens) of one sequence: together over each read of
// the K/V rows with AVX-512, else KV head by KV head, token by token.
void attend_tokens(const AttentionBatch& b, int t0, int n_tokens, HeadRange r, Isa isa) {
  const KvSpan& kv = *b.kv[t0];
  const int per_kv = b.n_head / kv.n_head_kv;
  auto q_offset = [&](int t, int kv_head, int g) {
    return (static_cast<int64_t>(t) * b.n_head + kv_head * per_kv + r.first + g) * b.head_dim;
  };
  auto from = [&](int t) { return b.attend_from ? b.attend_from[t] : b.pos[t]; };
  auto until = [&](int t) { return b.attend_until ? b.attend_until[t] : b.pos[t]; };
#if HR_HAS_AVX2_PATH
  if (isa >= Isa::kAvx512) {
    if (const avx512::TileFn fn = avx512::pick(kv.k_type, kv.v_type, b.head_dim)) {
      avx512::TileTask tile{.kv = kv,
                            .first = r.kv_head * kv.head_dim,
                            .d = b.head_dim,
                            .window = b.window,
                            .scale = b.scale,
                            .n_kv = r.n_kv,
                            .n_tokens = n_tokens,
                            .heads_per_token = r.n_heads};
      for (int i = 0; i < n_tokens; ++i) {
        tile.q_pos[i] = b.pos[t0 + i];
        tile.from[i] = from(t0 + i);
        tile.until[i] = until(t0 + i);
      }
      for (int h = 0; h < tile.n_heads(); ++h) {
        const int64_t at =
            q_offset(t0 + tile.token_of(h), r.kv_head + h / tile.heads_per_kv(), h % r.n_heads);
        tile.q[h] = b.q + at;
        tile.out[h] = b.out + at;
      }
      return fn(tile);
    }
  }
#endif
  for (int kv_head = r.kv_head; kv_head < r.kv_head + r.n_kv; ++kv_head) {
    for (int t = t0; t < t0 + n_tokens; ++t) {
      const HeadTask h{kv,
                       b.q + q_offset(t, kv_head, 0),
                       b.out + q_offset(t, kv_head, 0),
                       kv_head * kv.head_dim,
                       b.head_dim,
                       b.pos[t],
                       from(t),
                       until(t),
                       b.window,
                       b.scale};
#if HR_HAS_AVX2_PATH
      if (isa >= Isa::kAvx2) {
        if (const avx2::AttendFn fn = avx2::pick(kv.k_type, kv.v_type, b.head_dim)) {
          fn(h, r.n_heads);
          continue;
        }
      }
#endif
      for (int g = 0; g < r.n_heads; ++g) {
        HeadTask one = h;
        one.q = h.q + static_cast<int64_t>(g) * b.head_dim;
        one.out = h.out + static_cast<int64_t>(g) * b.head_dim;
        attend_portable(one);
      }
    }
  }
}

}  // namespace

// Work items are (tile of consecutive tokens, group of the query heads sharing a KV head). A KV
// head's heads are split into as many groups as it takes to give every thread work (decode has few
// tokens and, with grouped-query attention, few KV heads) and to keep a group within kMaxGroup.
// With AVX-512, up to kMaxTile heads an item: a prefill's tokens are tiled, so that a sequence's
// tokens share each read of its K/V rows (a run of another sequence's tokens in a tile is attended
// apart), and a decode step's item takes consecutive KV heads whole, so that it reads stretches of
// each row rather than a head's slice. Results depend on neither.
void CpuBackend::attention(const AttentionBatch& b) {
  if (b.n_tokens == 0) return;
  const int n_head_kv = b.kv[0]->n_head_kv;
  const int per_kv = b.n_head / n_head_kv;
  const int items_per_group = b.n_tokens * n_head_kv;
  const int splits = std::clamp((pool_.size() + items_per_group - 1) / items_per_group,
                                (per_kv + kMaxGroup - 1) / kMaxGroup, per_kv);
  const int group = (per_kv + splits - 1) / splits;
  const int groups_per_kv = (per_kv + group - 1) / group;
  const int groups = n_head_kv * groups_per_kv;
  // Tiles as large as leave every thread several items; then KV heads per item as many as leave
  // every thread one.
  const int per_tile = avx512() ? std::clamp(b.n_tokens * groups / (4 * pool_.size()), 1,
                                             std::min(b.n_tokens, kMaxTile / group))
                                : 1;
  const int n_tiles = (b.n_tokens + per_tile - 1) / per_tile;
  const int kv_per_item =
      avx512() && groups_per_kv == 1
          ? std::clamp(n_tiles * n_head_kv / pool_.size(), 1, kMaxTile / (per_tile * group))
          : 1;
  const int kv_items = (n_head_kv + kv_per_item - 1) / kv_per_item;
  const int items_per_tile = kv_items * groups_per_kv;
  pool_.parallel_for(n_tiles * items_per_tile, [&](int task, int) {
    const int tile = task / items_per_tile, item = task % items_per_tile;
    const int kv_head = item / groups_per_kv * kv_per_item;
    const int first = item % groups_per_kv * group;
    const HeadRange heads{kv_head, std::min(kv_per_item, n_head_kv - kv_head), first,
                          std::min(group, per_kv - first)};
    const int end = std::min(b.n_tokens, (tile + 1) * per_tile);
    for (int t0 = tile * per_tile; t0 < end;) {
      int run = 1;
      while (t0 + run < end && b.kv[t0 + run] == b.kv[t0]) ++run;
      attend_tokens(b, t0, run, heads, isa_);
      t0 += run;
    }
  });
}

}  // namespace kernels::cpu
