// mm::Image — PNG and JPEG decoding (libpng, libjpeg-turbo) to 8-bit RGB as the reference image
// processor sees it: PIL's decode followed by convert("RGB") (palette expanded, gray replicated,
// alpha dropped, 16-bit channels cut to their high byte; EXIF orientation not applied).
//
// The size is read from the header first, so an image with more than `max_pixels` pixels is
// refused before anything is decoded; corrupt and truncated files are refused in one line.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace mm {

enum class ImageFormat { kPng, kJpeg };
std::string_view image_format_name(ImageFormat format);

struct ImageHeader {
  ImageFormat format = ImageFormat::kPng;
  int width = 0;
  int height = 0;
  int64_t pixels() const { return static_cast<int64_t>(width) * height; }
};

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // [height][width][3], rows top to bottom
};

// The most pixels headroom decodes in one image: 4096 × 4096. Decoding holds the whole RGB image
// (48 MiB at this size), which the plan prices; larger photos should be downscaled first.
inline constexpr int64_t kMaxImagePixels = int64_t{4096} * 4096;

// The format and size, from the header alone. Refuses what is neither PNG nor JPEG, an empty or
// truncated header, and images over `max_pixels`.
util::Result<ImageHeader> read_image_header(std::span<const uint8_t> bytes,
                                            int64_t max_pixels = kMaxImagePixels);
util::Result<Image> decode_image(std::span<const uint8_t> bytes,
                                 int64_t max_pixels = kMaxImagePixels);

}  // namespace mm
