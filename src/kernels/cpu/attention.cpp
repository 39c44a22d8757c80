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
// into a buffer on the stack. With AVX-512 the rows are read 16 lanes at a time (head_dim a
// multiple of 16 for f32/f16) around the same softmax.
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
  const uint8_t* k_row(int c) const {
    return kv.k_blocks[c / kv.cells_per_block] +
           static_cast<size_t>(c % kv.cells_per_block) * kv.k_row_bytes;
  }
  const uint8_t* v_row(int c) const {
    return kv.v_blocks[c / kv.cells_per_block] +
           static_cast<size_t>(c % kv.cells_per_block) * kv.v_row_bytes;
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
      const float* k = head_slice(h.kv.k_type, h.k_row(c), h.first, h.d, k_buffer);
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
      const float* v = head_slice(h.kv.v_type, h.v_row(cell[j]), h.first, h.d, v_buffer);
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
// reader's dot and axpy: one call per chunk, so that a reader compiled for a wider target than the
// softmax around it costs no call per row.
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
// KChunk and VChunk are Chunk<reader> of this target's readers or of the AVX-512 ones.
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
    for (int j = 0; j < n; ++j) rows[j] = h.k_row(cell[j]);
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
      rows[j] = h.v_row(cell[j]);
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

// The kernel for a K/V type pair with the chunk readers of one target (Readers<type>::Chunk), or
// nullptr when there is none.
template <template <DType> class Readers, class KChunk>
AttendFn pick_v(DType v_type) {
  switch (v_type) {
    case DType::kF32:
      return attend<KChunk, typename Readers<DType::kF32>::Chunk>;
    case DType::kF16:
      return attend<KChunk, typename Readers<DType::kF16>::Chunk>;
    case DType::kQ8_0:
      return attend<KChunk, typename Readers<DType::kQ8_0>::Chunk>;
    case DType::kQ4_0:
      return attend<KChunk, typename Readers<DType::kQ4_0>::Chunk>;
    default:
      return nullptr;
  }
}

// The same, for a head size whose slice of a row the readers cover whole: `lanes` values (their
// vector width) for f32 and f16 rows, 32-value blocks for q8_0 and q4_0.
template <template <DType> class Readers>
AttendFn pick(DType k_type, DType v_type, int head_dim, int lanes) {
  auto covers = [&](DType t) {
    return head_dim % (t == DType::kF32 || t == DType::kF16 ? lanes : 32) == 0;
  };
  if (!covers(k_type) || !covers(v_type)) return nullptr;
  switch (k_type) {
    case DType::kF32:
      return pick_v<Readers, typename Readers<DType::kF32>::Chunk>(v_type);
    case DType::kF16:
      return pick_v<Readers, typename Readers<DType::kF16>::Chunk>(v_type);
    case DType::kQ8_0:
      return pick_v<Readers, typename Readers<DType::kQ8_0>::Chunk>(v_type);
    case DType::kQ4_0:
      return pick_v<Readers, typename Readers<DType::kQ4_0>::Chunk>(v_type);
    default:
      return nullptr;
  }
}

// This target's readers by cache type.
template <DType T>
struct Readers256;
template <>
struct Readers256<DType::kF32> {
  using Chunk = avx2::Chunk<F32Row>;
};
template <>
struct Readers256<DType::kF16> {
  using Chunk = avx2::Chunk<F16Row>;
};
template <>
struct Readers256<DType::kQ8_0> {
  using Chunk = avx2::Chunk<BlockRow<Q8_0Row>>;
};
template <>
struct Readers256<DType::kQ4_0> {
  using Chunk = avx2::Chunk<BlockRow<Q4_0Row>>;
};

}  // namespace avx2

// The same readers 16 lanes wide (dot products summed in another order: AVX-512 results are the
// AVX2 ones within rounding, and as batch- and thread-independent).
HR_AVX512_BEGIN
namespace avx512 {

inline __m512 load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

struct F32Row {
  static __m512 load16(const uint8_t* row, int at) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + at);
  }
  static float dot(const float* q, const uint8_t* row, int first, int d) {
    const float* k = reinterpret_cast<const float*>(row) + first;
    __m512 s = _mm512_setzero_ps();
    for (int i = 0; i < d; i += 16)
      s = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), _mm512_loadu_ps(k + i), s);
    return simd::hsum512(s);
  }
};

struct F16Row {
  static __m512 load16(const uint8_t* row, int at) {
    return load_f16(reinterpret_cast<const uint16_t*>(row) + at);
  }
  static float dot(const float* q, const uint8_t* row, int first, int d) {
    const uint16_t* k = reinterpret_cast<const uint16_t*>(row) + first;
    __m512 s = _mm512_setzero_ps();
    for (int i = 0; i < d; i += 16) s = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), load_f16(k + i), s);
    return simd::hsum512(s);
  }
};

// A 32-value block as two groups of 16 signed integers (as floats).
struct Q8_0Row {
  using Block = tensor::BlockQ8_0;
  static void decode(const Block& b, __m512 v[2]) {
    v[0] = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs))));
    v[1] = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16))));
  }
};

// q4_0: value j < 16 is the low nibble of qs[j], value j ≥ 16 the high nibble of qs[j − 16],
// both minus 8.
struct Q4_0Row {
  using Block = tensor::BlockQ4_0;
  static void decode(const Block& b, __m512 v[2]) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i nibble = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(packed, nibble), eight);
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), nibble), eight);
    v[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
    v[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
  }
};

template <class Format>
struct BlockRow {
  using Block = typename Format::Block;
  static float dot(const float* q, const uint8_t* row, int first, int d) {
    const Block* blocks = reinterpret_cast<const Block*>(row) + first / 32;
    __m512 s = _mm512_setzero_ps();
    for (int b = 0; b < d / 32; ++b) {
      __m512 k[2];
      Format::decode(blocks[b], k);
      const float* qb = q + 32 * b;
      const __m512 block_dot =
          _mm512_fmadd_ps(_mm512_loadu_ps(qb + 16), k[1], _mm512_mul_ps(_mm512_loadu_ps(qb), k[0]));
      s = _mm512_fmadd_ps(block_dot, _mm512_set1_ps(_cvtsh_ss(blocks[b].d)), s);
    }
    return simd::hsum512(s);
  }
  static void axpy(float* acc, float w, const uint8_t* row, int first, int d) {
    const Block* blocks = reinterpret_cast<const Block*>(row) + first / 32;
    for (int b = 0; b < d / 32; ++b) {
      __m512 v[2];
      Format::decode(blocks[b], v);
      const __m512 wd = _mm512_set1_ps(w * _cvtsh_ss(blocks[b].d));
      float* a = acc + 32 * b;
      for (int j = 0; j < 2; ++j)
        _mm512_storeu_ps(a + 16 * j, _mm512_fmadd_ps(wd, v[j], _mm512_loadu_ps(a + 16 * j)));
    }
  }
};

// Lanes [at, at + 16·W) of one head's accumulator, carried in registers over a chunk's rows.
template <class Row, int W>
void accumulate_slice(float* acc, const uint8_t* const* rows, int n, const float* weight, int at) {
  __m512 a[W];
  for (int k = 0; k < W; ++k) a[k] = _mm512_loadu_ps(acc + 16 * k);
  for (int j = 0; j < n; ++j) {
    const __m512 vw = _mm512_set1_ps(weight[j]);
    for (int k = 0; k < W; ++k) a[k] = _mm512_fmadd_ps(vw, Row::load16(rows[j], at + 16 * k), a[k]);
  }
  for (int k = 0; k < W; ++k) _mm512_storeu_ps(acc + 16 * k, a[k]);
}

template <class Row>
struct Chunk {
  static void scores(const float* const* q, int n_heads, const uint8_t* const* rows, int n,
                     int first, int d, float scale, float (*score)[kChunk]) {
    for (int j = 0; j < n; ++j) {
      for (int g = 0; g < n_heads; ++g) score[g][j] = Row::dot(q[g], rows[j], first, d) * scale;
    }
  }
  // Rows that load 16 values at a time (f32, f16) are summed 64 lanes of a head at a time over
  // all the chunk's rows, the accumulator in registers, not loaded and stored per row (for heads
  // of 256 and 512 that traffic, not the cache's bytes, bounded decode attention at depth). Each
  // lane still adds the rows' terms in row order: the results are the same bits.
  static void accumulate(float (*acc)[kMaxHeadDim], int n_heads, const uint8_t* const* rows, int n,
                         const float (*weight)[kChunk], int first, int d) {
    if constexpr (requires { Row::load16(rows[0], 0); }) {
      for (int g = 0; g < n_heads; ++g) {
        int i = 0;
        for (; i + 64 <= d; i += 64)
          accumulate_slice<Row, 4>(acc[g] + i, rows, n, weight[g], first + i);
        for (; i < d; i += 16) accumulate_slice<Row, 1>(acc[g] + i, rows, n, weight[g], first + i);
      }
    } else {
      for (int j = 0; j < n; ++j) {
        for (int g = 0; g < n_heads; ++g) Row::axpy(acc[g], weight[g][j], rows[j], first, d);
      }
    }
  }
};

template <DType T>
struct Readers512;
template <>
struct Readers512<DType::kF32> {
  using Chunk = avx512::Chunk<F32Row>;
};
template <>
struct Readers512<DType::kF16> {
  using Chunk = avx512::Chunk<F16Row>;
};
template <>
struct Readers512<DType::kQ8_0> {
  using Chunk = avx512::Chunk<BlockRow<Q8_0Row>>;
};
template <>
struct Readers512<DType::kQ4_0> {
  using Chunk = avx512::Chunk<BlockRow<Q4_0Row>>;
};

}  // namespace avx512
HR_AVX512_END
#endif  // HR_HAS_AVX2_PATH

}  // namespace

// Work items are (token, group of the query heads sharing a KV head). A KV head's heads are split
// into as many groups as it takes to give every thread work (decode has few tokens and, with
// grouped-query attention, few KV heads) and to keep a group within kMaxGroup.
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
  pool_.parallel_for(b.n_tokens * groups, [&](int task, int) {
    const int t = task / groups, kv_head = task % groups / groups_per_kv;
    const int head0 = kv_head * per_kv + task % groups_per_kv * group;
    const int n_heads = std::min(group, (kv_head + 1) * per_kv - head0);
    const KvSpan& kv = *b.kv[t];
    const int64_t offset = (static_cast<int64_t>(t) * b.n_head + head0) * b.head_dim;
    const HeadTask h{kv,
                     b.q + offset,
                     b.out + offset,
                     kv_head * kv.head_dim,
                     b.head_dim,
                     b.pos[t],
                     b.attend_from ? b.attend_from[t] : b.pos[t],
                     b.attend_until ? b.attend_until[t] : b.pos[t],
                     b.window,
                     b.scale};
#if HR_HAS_AVX2_PATH
    if (avx512()) {
      if (const avx2::AttendFn fn =
              avx2::pick<avx512::Readers512>(kv.k_type, kv.v_type, b.head_dim, 16))
        return fn(h, n_heads);
    }
    if (avx2()) {
      if (const avx2::AttendFn fn =
              avx2::pick<avx2::Readers256>(kv.k_type, kv.v_type, b.head_dim, 8))
        return fn(h, n_heads);
    }
#endif
    for (int g = 0; g < n_heads; ++g) {
      HeadTask one = h;
      one.q = h.q + static_cast<int64_t>(g) * b.head_dim;
      one.out = h.out + static_cast<int64_t>(g) * b.head_dim;
      attend_portable(one);
    }
  });
}

}  // namespace kernels::cpu
