// libFuzzer target for the image decoders (PNG, JPEG): any input either decodes or fails cleanly.
//
// Properties checked on every input:
//   - a failure is one line starting "image: ";
//   - the header is read before anything is decoded, and an image over the pixel bound is refused
//     from it (a 64 Mi-pixel header must not allocate its pixels: -malloc_limit_mb catches that);
//   - a success has width × height × 3 bytes, as its header said.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "mm/image.h"

namespace {

// 1 Mi pixels: 3 MiB of RGB at most, well under the run's 64 MiB allocation limit.
constexpr int64_t kMaxPixels = int64_t{1} << 20;

[[noreturn]] void violated(const char* what, const std::string& detail) {
  std::fprintf(stderr, "image_fuzz: property violated: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_error(const util::Error& error) {
  const std::string& m = error.message();
  if (m.find('\n') != std::string::npos) violated("error is not one line", m);
  if (m.rfind("image: ", 0) != 0) violated("error does not start with 'image: '", m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  auto header = mm::read_image_header(bytes, kMaxPixels);
  if (!header) check_error(header.error());
  auto image = mm::decode_image(bytes, kMaxPixels);
  if (!image) {
    check_error(image.error());
    return 0;
  }
  if (!header) violated("decoded an image whose header was refused", header.error().message());
  if (image->width != header->width || image->height != header->height ||
      image->rgb.size() != static_cast<size_t>(image->width) * image->height * 3)
    violated("the decoded size is not the header's", std::to_string(image->rgb.size()));
  return 0;
}
