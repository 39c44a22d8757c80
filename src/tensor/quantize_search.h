// Scale searches the quantizers share: for one group of values (and optional per-value weights),
// the scale (and min) and integer levels that make the weighted error small.
//
// Each search follows one of the GGUF ecosystem's reference searches step for step (the same
// candidate grids, weights and float operation order), because the bytes of a quantized file
// depend on every rounding: matching them is how tests/tensor/ proves the algorithm is the same.
// The reference name is given beside each search; the algorithm is described, the code our own.
#pragma once

#include <cstdint>

namespace tensor::search {

// Scales below this count as zero: the group is all zeros (or denormal noise).
inline constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |x| < 2^22, as the reference rounds: adding 1.5 * 2^23
// leaves x's integer part in the low mantissa bits, rounded by the f32 addition itself
// (std::lround would round ties away from zero and give different bytes).
int nearest_int(float x);

// Symmetric fit x ≈ scale * (L - nmax) with L in 0..2·nmax-1 (make_qx_quants, rmse type 1). The
// value of largest magnitude anchors the grid at -nmax; 18 nearby grids (nmax ± 0.1k) are tried
// and the best weighted least-squares fit kept. `weights` may be null: then each value weighs x²
// (large values matter most to the model). Returns the scale, signed like the anchor.
float fit_symmetric(int n, int nmax, const float* x, const float* weights, int8_t* levels);

// The symmetric fit of Q3_K without an importance matrix (make_q3_quants with rmse): the anchor
// grid, then up to 5 rounds moving single levels while that improves the x²-weighted fit.
float fit_symmetric_refined(int n, int nmax, const float* x, int8_t* levels);

// How a scale-and-min search walks its candidates: levels 0..nmax, and nstep + 1 grids with
// nmax + rmin + rdelta·k steps across the value range. `absolute_error` scores candidates by
// weighted |error| instead of weighted error² (Q2_K does).
struct ScaleMinSearch {
  int nmax;
  float rmin;
  float rdelta;
  int nstep;
  bool absolute_error = false;
};

// Fit x ≈ scale * L - min with L in 0..nmax (make_qkx2_quants / make_qkx3_quants): starts from the
// plain (max - min) / nmax grid, then for each candidate grid fixes the levels and solves the
// weighted 2x2 least-squares problem for scale and min, keeping the best. Returns the scale;
// *min_out gets the min as a non-negative offset (x ≈ scale * L - *min_out).
float fit_scale_min(const ScaleMinSearch& search, int n, const float* x, const float* weights,
                    uint8_t* levels, float* min_out);

// Fit of non-negative values x ≈ scale * L with L in 0..nmax (make_qp_quants), used for the
// sub-block scales of the importance-weighted K-quants: 9 grids, then up to 5 rounds moving
// single levels while the weighted fit improves.
float fit_positive(int n, int nmax, const float* x, const float* weights, uint8_t* levels);

// Index of the level in `levels` (n ascending values) nearest to x; ties go up (the reference's
// best_index_int8).
int nearest_level(int n, const int8_t* levels, float x);

}  // namespace tensor::search
