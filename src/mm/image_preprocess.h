// Gemma 4's image preprocessing (Hugging Face's Gemma4ImageProcessorPil): resize preserving the
// aspect ratio to the largest size, in multiples of pooling × patch pixels, whose patches fit the
// soft-token budget; bicubic resampling as PIL does it on 8-bit images (bit for bit); values
// rescaled to [0, 1] and, as the model's patch embedder does first, to 2·(v − 0.5); the image cut
// into patch_size × patch_size patches, row by row.
#pragma once

#include <vector>

#include "mm/image.h"
#include "mm/projector.h"
#include "util/result.h"

namespace mm {

// The soft-token budgets Gemma 4's image processor accepts (max_soft_tokens).
inline constexpr int kImageTokenBudgets[] = {70, 140, 280, 560, 1120};
inline constexpr int kDefaultImageTokens = 280;  // the processor's default
// A budget must be one of kImageTokenBudgets: a one-line error otherwise.
util::Status check_image_tokens(int tokens);

struct Size {
  int height = 0;
  int width = 0;
};

// get_aspect_ratio_preserving_size: the target size for an image of height × width pixels.
util::Result<Size> target_size(int height, int width, int patch_size, int pooling, int max_tokens);

// PIL's Image.resize(BICUBIC) of an 8-bit RGB image: separable, filter support scaled with the
// reduction (antialiasing), fixed-point coefficients, horizontal pass first, each rounded to 8
// bits.
Image resize_bicubic(const Image& image, int width, int height);

// One image, ready for the vision encoder.
struct ImagePatches {
  int grid_width = 0;   // patches across
  int grid_height = 0;  // patches down
  int n_tokens = 0;     // soft tokens after pooling: grid_width · grid_height / pooling²
  // [grid_height · grid_width][3 · p²], patch by patch row-major; inside a patch channel-major,
  // (c · p + y) · p + x, the column order of the patch-embedding kernel. Values 2·(v/255 − 0.5),
  // computed in f32 as the reference's rescale (f32(v/255)) and embedder (2·(x − 0.5)) do.
  std::vector<float> pixels;
  int n_patches() const { return grid_width * grid_height; }
};

// The image resized to the size target_size() picks for the budget (checked against the
// encoder's position tables).
util::Result<Image> resize_for_budget(const Image& image, const VisionSpec& vision, int max_tokens);
// Cuts a resized image (sides multiples of pooling × patch) into patches, reusing out's storage.
void patchify(const Image& resized, const VisionSpec& vision, ImagePatches& out);
// resize_for_budget, then patchify.
util::Result<ImagePatches> preprocess_image(const Image& image, const VisionSpec& vision,
                                            int max_tokens);

// The soft tokens an image of height × width pixels becomes under a budget.
util::Result<int> image_token_count(int height, int width, const VisionSpec& vision,
                                    int max_tokens);

}  // namespace mm
