// The scale searches of quantize_search.h.
#include "tensor/quantize_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tensor::search {
namespace {

// The value of largest magnitude, with its sign (the first one on ties), and that magnitude.
float signed_extreme(int n, const float* x, float* amax) {
  float max = 0;
  *amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > *amax) {
      *amax = ax;
      max = x[i];
    }
  }
  return max;
}

}  // namespace

int nearest_int(float x) {
  const float biased = x + 12582912.0f;
  uint32_t bits;
  std::memcpy(&bits, &biased, sizeof bits);
  return static_cast<int>(bits & 0x007fffffu) - 0x00400000;
}

int nearest_level(int n, const int8_t* levels, float x) {
  if (x <= levels[0]) return 0;
  if (x >= levels[n - 1]) return n - 1;
  int lo = 0;
  int hi = n - 1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < levels[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - levels[hi - 1] < levels[hi] - x ? hi - 1 : hi;
}

float fit_symmetric(int n, int nmax, const float* x, const float* weights, int8_t* levels) {
  float amax;
  const float max = signed_extreme(n, x, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(levels, levels + n, int8_t{0});
    return 0.0f;
  }
  auto level = [&](float iscale, int i) {
    return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
  };
  // Σ w·x·l and Σ w·l² for a grid; the least-squares scale for its levels is their ratio.
  auto fit = [&](float iscale, float* sum_lx, float* sum_l2) {
    *sum_lx = 0;
    *sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(level(iscale, i));
      const float w = weights ? weights[i] : x[i] * x[i];
      *sum_lx += w * x[i] * l;
      *sum_l2 += w * l * l;
    }
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(level(iscale, i) + nmax);
  };
  float iscale = static_cast<float>(-nmax) / max;
  float sum_lx, sum_l2;
  fit(iscale, &sum_lx, &sum_l2);
  assign(iscale);
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;  // the reduction in squared error this fit achieves
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    fit(iscale, &sum_lx, &sum_l2);
    // sum_lx² / sum_l2 > best, without dividing.
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      assign(iscale);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

float fit_symmetric_refined(int n, int nmax, const float* x, int8_t* levels) {
  float amax;
  const float max = signed_extreme(n, x, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(levels, levels + n, int8_t{0});
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sum_lx = 0;
  float sum_l2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    levels[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * static_cast<float>(l);
    sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  // Coordinate descent: move one level to the best one for the others' fit, keep it when the
  // explained share sum_lx² / sum_l2 grows.
  for (int round = 0; round < 5; ++round) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(levels[i]);
      float slx = sum_lx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = sum_l2 - w * li * li;
        const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != levels[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (sl2 > 0 && slx * slx * sum_l2 > sum_lx * sum_lx * sl2) {
            levels[i] = static_cast<int8_t>(new_l);
            sum_lx = slx;
            sum_l2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(levels[i] + nmax);
  return sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
}

float fit_scale_min(const ScaleMinSearch& search, int n, const float* x, const float* weights,
                    uint8_t* levels, float* min_out) {
  const int nmax = search.nmax;
  auto error_of = [&](float diff) { return search.absolute_error ? std::fabs(diff) : diff * diff; };
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;  // the offset only ever shifts down: all-positive groups keep min 0
  if (max == min) {
    std::fill(levels, levels + n, uint8_t{0});
    *min_out = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    levels[i] = static_cast<uint8_t>(std::clamp(l, 0, nmax));
    best_error += weights[i] * error_of(scale * static_cast<float>(levels[i]) + min - x[i]);
  }
  uint8_t trial[256];
  for (int step = 0; step <= search.nstep; ++step) {
    iscale = (search.rmin + search.rdelta * static_cast<float>(step) + static_cast<float>(nmax)) /
             (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float wl = weights[i] * static_cast<float>(l);
      sum_l += wl;
      sum_l2 += wl * static_cast<float>(l);
      sum_xl += wl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;  // degenerate (all levels equal) or nan: no fit to try
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {  // a positive min cannot be stored: refit the scale alone with min 0
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      error += weights[i] * error_of(this_scale * static_cast<float>(trial[i]) + this_min - x[i]);
    }
    if (error < best_error) {
      std::copy(trial, trial + n, levels);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *min_out = -min;
  return scale;
}

float fit_positive(int n, int nmax, const float* x, const float* weights, uint8_t* levels) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kGroupMaxEps) {
    std::fill(levels, levels + n, uint8_t{0});
    return 0.0f;
  }
  // Pick the grid nmax + 0.1k (k = -4..4) with the lowest weighted squared error.
  float iscale = static_cast<float>(nmax) / max;
  float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * static_cast<float>(nearest_int(iscale * x[i]));
    best_mse += weights[i] * diff * diff;
  }
  for (int k = -4; k <= 4; ++k) {
    if (k == 0) continue;
    const float iscale_k = (0.1f * static_cast<float>(k) + static_cast<float>(nmax)) / max;
    const float scale_k = 1 / iscale_k;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest_int(iscale_k * x[i]));
      const float diff = x[i] - scale_k * static_cast<float>(l);
      mse += weights[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_k;
    }
  }
  float sum_lx = 0;
  float sum_l2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(iscale * x[i]));
    levels[i] = static_cast<uint8_t>(l);
    sum_lx += weights[i] * x[i] * static_cast<float>(l);
    sum_l2 += weights[i] * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int round = 0; round < 5; ++round) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = weights[i];
      const float li = static_cast<float>(levels[i]);
      float slx = sum_lx - w * x[i] * li;
      float sl2 = sum_l2 - w * li * li;
      if (slx > 0 && sl2 > 0) {
        const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
        if (new_l != levels[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (slx * slx * sum_l2 > sum_lx * sum_lx * sl2) {
            levels[i] = static_cast<uint8_t>(new_l);
            sum_lx = slx;
            sum_l2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  return sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
}

}  // namespace tensor::search
