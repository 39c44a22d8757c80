// Shared pieces of the CPU kernels' AVX2 and AVX-512 paths: the target attributes, masks for row
// tails, horizontal sums and vector exp/sigmoid/tanh. Include only from kernels/cpu/*.cpp; every
// function here must be called from a function compiled for the same target (HR_AVX2 or
// HR_AVX512), after a run-time check.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#define HR_HAS_AVX2_PATH 1
#define HR_AVX2 __attribute__((target("avx2,fma,f16c")))
#define HR_AVX512 __attribute__((target("avx2,fma,f16c,avx512f")))
// The region of a file compiled for the AVX-512 VNNI kernels (dot_simple.cpp, dot_kquant.cpp).
// GCC 12's 512-bit intrinsics start from _mm512_undefined_*(), which its own uninitialized-value
// warnings then report (GCC bug 105593, fixed in 13), so those are off inside.
#define HR_AVX512_VNNI_BEGIN                                                                   \
  _Pragma("GCC push_options")                                                                  \
      _Pragma("GCC target(\"avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni\")")            \
          _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
              _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define HR_AVX512_VNNI_END _Pragma("GCC diagnostic pop") _Pragma("GCC pop_options")
// The same for code that needs only the AVX-512 level (Isa::kAvx512: F, BW, VL), not VNNI.
#define HR_AVX512_BEGIN                                                                          \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c,avx512f,avx512bw,avx512vl\")") \
      _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")       \
          _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define HR_AVX512_END _Pragma("GCC diagnostic pop") _Pragma("GCC pop_options")
#else
#define HR_HAS_AVX2_PATH 0
#endif

namespace kernels::cpu::simd {

#if HR_HAS_AVX2_PATH

// Decode reads each weight byte once, and the hardware prefetchers stop at every 4 KiB page (the
// weights are a file mapping): fetch the lines this many bytes ahead of the ones in use. E2B-shaped
// decode on 2 threads (bench/kernels/matmul_bench BM_E2bLayers), AVX-512 level: Q4_K 33 -> 43
// GB/s, Q6_K 33 -> 49, Q8_0 +8 %, Q4_0 +10 % at 3 KiB (2 and 4 KiB within noise of it); AVX2
// level K-quants: +13 % and +5 %.
inline constexpr int kPrefetchBytes = 3072;
inline void prefetch_ahead(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p) + kPrefetchBytes;
  for (size_t i = 0; i < bytes; i += 64) _mm_prefetch(c + i, _MM_HINT_T0);
}

// The K-quant decode dots' prefetches for one weight row. Where the activation row they read
// against every weight row is longer than kPartnerInL1Bytes, the weight lines go to L2 only, twice
// as far ahead: fetched into L1 they evicted the activations, which each row then read from L2
// again. A 31B down projection (21504 columns: 24 KiB of Q8_K), Zen 4, 2 threads
// (matmul_bench BM_31bLayer/T/1): Q4_K 1.38-1.48x, Q6_K 1.51-1.71x (~25 -> ~40 GB/s, bench/
// RESULTS.md); rows of 9 and 14 KiB (31B's output projection, E2B's widest) read the same or
// faster with L1 prefetches, so rows up to 16 KiB keep them. On Zen 5 (48 KiB L1) the 24 KiB rows
// still read ~5 % faster to L2 than to L1. Not for the simple formats: Q8_0 read 0.73x that way.
inline constexpr size_t kPartnerInL1Bytes = 16384;
inline constexpr int kPrefetchL2Bytes = 6144;

class RowPrefetch {
 public:
  explicit RowPrefetch(size_t partner_row_bytes) : to_l2_(partner_row_bytes > kPartnerInL1Bytes) {}
  // The lines of the `bytes` at p, some way ahead of p.
  void ahead(const void* p, size_t bytes) const {
    if (!to_l2_) return prefetch_ahead(p, bytes);
    const char* c = static_cast<const char*>(p) + kPrefetchL2Bytes;
    for (size_t i = 0; i < bytes; i += 64) _mm_prefetch(c + i, _MM_HINT_T1);
  }

 private:
  bool to_l2_;
};

// Lanes [0, count) set, count in [0, 8]: row tails go through the same vector arithmetic as the
// body (masked loads and stores), so where a row is cut into chunks never changes its values.
HR_AVX2 inline __m256i tail_mask(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

HR_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Σ of 16 lanes: the halves added, then hsum's tree.
HR_AVX512 inline float hsum512(__m512 v) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), hi));
}

// e^x for x in any range (clamped to ±88.376: the result saturates to 0 or ~2.4e38, never inf
// or nan for finite or infinite x). Cephes' expf: x = n·ln2 + r, e^r by a degree-5 polynomial,
// then 2^n from the exponent bits. Relative error ≤ 2e-7 (measured against std::exp over
// [-88, 88] in the tests of the activations that use it).
HR_AVX2 inline __m256 exp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f)),
                    _mm256_set1_ps(88.3762626647949f));
  const __m256 n = _mm256_floor_ps(
      _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  // r = x − n·ln2, with ln2 split in two so n·ln2_hi is exact.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n: n + 127 in the exponent field (n = −127 gives 0, below the normal range: fine here).
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// 1 / (1 + e^−x). No cancellation anywhere, so the relative error stays that of exp.
HR_AVX2 inline __m256 sigmoid(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// tanh(x): Cephes' tanhf. |x| < 0.625: x + x³·P(x²) (1 − 2/(e^2x + 1) would cancel there);
// otherwise 1 − 2/(e^2|x| + 1) with the sign of x. Relative error ≤ 4e-7.
HR_AVX2 inline __m256 tanh(__m256 x) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign_bit, x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp(_mm256_add_ps(ax, ax));
  __m256 large = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  large = _mm256_or_ps(large, _mm256_and_ps(x, sign_bit));
  return _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
}

#endif  // HR_HAS_AVX2_PATH

}  // namespace kernels::cpu::simd
