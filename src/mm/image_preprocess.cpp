// Target size, PIL's bicubic resampling and patching (image_preprocess.h).
#include "mm/image_preprocess.h"

#include <algorithm>
#include <cmath>

namespace mm {
namespace {

// PIL's bicubic kernel (a = −0.5) and its support in source pixels at scale 1.
double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}
constexpr double kSupport = 2.0;
// PIL's fixed point for 8-bit images: coefficients scaled by 2^22.
constexpr int kPrecisionBits = 32 - 8 - 2;

// For each output pixel of one axis: the first source pixel, how many, and their weights.
struct AxisCoefficients {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;  // [out][ksize]
};

// precompute_coeffs + normalize_coeffs_8bpc of PIL's Resample.c, step for step.
AxisCoefficients coefficients(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = kSupport * filter_scale;
  const double inverse_scale = 1.0 / filter_scale;  // PIL multiplies by the reciprocal
  AxisCoefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weights.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> k(c.ksize);
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    const int n = hi - lo;
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
      k[i] = bicubic((i + lo - center + 0.5) * inverse_scale);
      sum += k[i];
    }
    for (int i = 0; i < n; ++i) {
      const double w = sum != 0.0 ? k[i] / sum : k[i];
      c.weights[static_cast<size_t>(o) * c.ksize + i] = static_cast<int32_t>(
          w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    c.first[o] = lo;
    c.count[o] = n;
  }
  return c;
}

uint8_t clip8(int32_t v) {
  return static_cast<uint8_t>(std::clamp(v >> kPrecisionBits, 0, 255));
}

// One output value: Σ weights × 8-bit sources, rounded by the 2^21 start, clipped to 8 bits.
template <class Source>
uint8_t weighted(const AxisCoefficients& c, int o, Source source) {
  int32_t sum = 1 << (kPrecisionBits - 1);
  const int32_t* w = c.weights.data() + static_cast<size_t>(o) * c.ksize;
  for (int i = 0; i < c.count[o]; ++i) sum += static_cast<int32_t>(source(c.first[o] + i)) * w[i];
  return clip8(sum);
}

}  // namespace

util::Status check_image_tokens(int tokens) {
  for (int b : kImageTokenBudgets) {
    if (tokens == b) return {};
  }
  return util::errorf("image tokens {} is not a budget Gemma 4 supports: 70, 140, 280, 560 or 1120",
                      tokens);
}

util::Result<Size> target_size(int height, int width, int patch_size, int pooling, int max_tokens) {
  if (height <= 0 || width <= 0) return util::errorf("image: the image has no pixels");
  const double total_px = static_cast<double>(height) * width;
  const int64_t max_patches = static_cast<int64_t>(max_tokens) * pooling * pooling;
  const double target_px = static_cast<double>(max_patches) * patch_size * patch_size;
  const double factor = std::sqrt(target_px / total_px);
  const int side = pooling * patch_size;
  int64_t th = static_cast<int64_t>(std::floor(factor * height / side)) * side;
  int64_t tw = static_cast<int64_t>(std::floor(factor * width / side)) * side;
  if (th == 0 && tw == 0) return util::errorf("image: {}x{} resizes to nothing", width, height);
  const int64_t max_side = (max_patches / (pooling * pooling)) * side;
  if (th == 0) {
    th = side;
    tw = std::min(static_cast<int64_t>(std::floor(static_cast<double>(width) / height)) * side,
                  max_side);
  } else if (tw == 0) {
    tw = side;
    th = std::min(static_cast<int64_t>(std::floor(static_cast<double>(height) / width)) * side,
                  max_side);
  }
  if (static_cast<double>(th) * tw > target_px)
    return util::errorf("image: {}x{} cannot fit {} image tokens", width, height, max_tokens);
  return Size{static_cast<int>(th), static_cast<int>(tw)};
}

Image resize_bicubic(const Image& in, int width, int height) {
  if (width == in.width && height == in.height) return in;
  const AxisCoefficients h = coefficients(in.width, width);
  AxisCoefficients v = coefficients(in.height, height);
  // Horizontal pass over the rows the vertical pass reads, then the vertical pass (PIL skips a
  // pass whose axis keeps its size).
  const Image* src = &in;
  Image temp;
  if (width != in.width) {
    const int row_first = v.first.front();
    const int row_last = v.first.back() + v.count.back();
    temp.width = width;
    temp.height = row_last - row_first;
    temp.rgb.resize(static_cast<size_t>(temp.width) * temp.height * 3);
    for (int y = 0; y < temp.height; ++y) {
      const uint8_t* row = in.rgb.data() + static_cast<size_t>(y + row_first) * in.width * 3;
      uint8_t* out = temp.rgb.data() + static_cast<size_t>(y) * width * 3;
      for (int x = 0; x < width; ++x) {
        for (int c = 0; c < 3; ++c)
          out[x * 3 + c] = weighted(h, x, [&](int i) { return row[i * 3 + c]; });
      }
    }
    for (int& f : v.first) f -= row_first;
    src = &temp;
  }
  if (height == in.height) return temp;
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    uint8_t* row = out.rgb.data() + static_cast<size_t>(y) * width * 3;
    for (int x = 0; x < width * 3; ++x) {
      row[x] =
          weighted(v, y, [&](int i) { return src->rgb[static_cast<size_t>(i) * width * 3 + x]; });
    }
  }
  return out;
}

util::Result<Image> resize_for_budget(const Image& image, const VisionSpec& vision,
                                      int max_tokens) {
  HR_TRY(check_image_tokens(max_tokens));
  HR_ASSIGN_OR_RETURN(Size size, target_size(image.height, image.width, vision.patch_size,
                                             vision.pooling, max_tokens));
  const int across = size.width / vision.patch_size, down = size.height / vision.patch_size;
  if (across > vision.n_positions || down > vision.n_positions) {
    return util::errorf(
        "image: {}x{} becomes {}x{} patches, more per side than the encoder's {} positions — crop "
        "it "
        "closer to square",
        image.width, image.height, across, down, vision.n_positions);
  }
  return resize_bicubic(image, size.width, size.height);
}

void patchify(const Image& resized, const VisionSpec& vision, ImagePatches& out) {
  const int p = vision.patch_size;
  out.grid_width = resized.width / p;
  out.grid_height = resized.height / p;
  out.n_tokens = out.n_patches() / (vision.pooling * vision.pooling);
  const int values = vision.patch_values();
  out.pixels.resize(static_cast<size_t>(out.n_patches()) * values);
  for (int gy = 0; gy < out.grid_height; ++gy) {
    for (int gx = 0; gx < out.grid_width; ++gx) {
      float* patch = out.pixels.data() + static_cast<size_t>(gy * out.grid_width + gx) * values;
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < p; ++y) {
          const uint8_t* row =
              resized.rgb.data() + (static_cast<size_t>(gy * p + y) * resized.width + gx * p) * 3;
          for (int x = 0; x < p; ++x) {
            const float v = static_cast<float>(row[x * 3 + c] / 255.0);
            patch[(c * p + y) * p + x] = 2.0f * (v - 0.5f);
          }
        }
      }
    }
  }
}

util::Result<ImagePatches> preprocess_image(const Image& image, const VisionSpec& vision,
                                            int max_tokens) {
  HR_ASSIGN_OR_RETURN(Image resized, resize_for_budget(image, vision, max_tokens));
  ImagePatches out;
  patchify(resized, vision, out);
  return out;
}

util::Result<int> image_token_count(int height, int width, const VisionSpec& vision,
                                    int max_tokens) {
  HR_TRY(check_image_tokens(max_tokens));
  HR_ASSIGN_OR_RETURN(Size size,
                      target_size(height, width, vision.patch_size, vision.pooling, max_tokens));
  const int patches = (size.height / vision.patch_size) * (size.width / vision.patch_size);
  return patches / (vision.pooling * vision.pooling);
}

}  // namespace mm
