// PNG (libpng) and JPEG (libjpeg-turbo) decoding to RGB, with the size checked before decoding.
//
// Both libraries report errors by longjmp. Everything a decode writes after setjmp lives on the
// heap behind a pointer set before it (Decode below), so a jump never leaves an automatic C++
// object half-updated.
#include "mm/image.h"

#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

namespace mm {
namespace {

util::Error too_large(int64_t width, int64_t height, int64_t max_pixels) {
  return util::errorf(
      "image: {}x{} is {:.1f} megapixels, more than the {:.1f} headroom decodes — downscale it "
      "first",
      width, height, static_cast<double>(width) * height / 1e6,
      static_cast<double>(max_pixels) / 1e6);
}

bool is_png(std::span<const uint8_t> b) {
  static constexpr uint8_t kMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return b.size() >= 8 && std::memcmp(b.data(), kMagic, 8) == 0;
}
bool is_jpeg(std::span<const uint8_t> b) {
  return b.size() >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff;
}

// --- PNG ---------------------------------------------------------------------------------------

struct PngDecode {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  char message[256] = "";
  Image image;
  std::vector<png_bytep> rows;
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngDecode() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

void png_read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* d = static_cast<PngDecode*>(png_get_io_ptr(png));
  if (n > d->bytes.size() - d->pos) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, d->bytes.data() + d->pos, n);
  d->pos += n;
}

void png_fail(png_structp png, png_const_charp message) {
  auto* d = static_cast<PngDecode*>(png_get_error_ptr(png));
  std::snprintf(d->message, sizeof d->message, "%s", message);
  png_longjmp(png, 1);
}

void png_ignore_warning(png_structp, png_const_charp) {}  // a decodable file decodes quietly

// libpng allocates a chunk's declared length before reading it (a tEXt chunk claiming 1 GB in a
// 116-byte file: found by fuzzing), so every chunk must fit in the bytes that are left first.
util::Status check_png_chunks(std::span<const uint8_t> bytes) {
  size_t at = 8;  // after the signature, which libpng checks
  while (bytes.size() >= at + 8) {
    const uint8_t* c = bytes.data() + at;
    const uint64_t length = (uint64_t{c[0]} << 24) | (c[1] << 16) | (c[2] << 8) | c[3];
    const std::string type(reinterpret_cast<const char*>(c + 4), 4);
    const bool named = std::all_of(type.begin(), type.end(), [](char ch) {
      return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
    });
    const size_t left = bytes.size() - at;
    if (12 + length > left) {
      return util::errorf(
          "image: corrupt PNG: {} claims {} bytes, more than the {} left in the file; send the "
          "whole, unmodified file",
          named ? "the " + type + " chunk" : "a chunk", length, left);
    }
    if (type == "IEND") break;
    at += 12 + length;
  }
  return {};
}

util::Result<Image> decode_png(std::span<const uint8_t> bytes, int64_t max_pixels,
                               ImageHeader* header) {
  HR_TRY(check_png_chunks(bytes));
  auto d = std::make_unique<PngDecode>();
  d->bytes = bytes;
  d->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, d.get(), png_fail, png_ignore_warning);
  if (d->png == nullptr) return util::errorf("image: cannot start the PNG decoder");
  d->info = png_create_info_struct(d->png);
  if (d->info == nullptr) return util::errorf("image: cannot start the PNG decoder");
  if (setjmp(png_jmpbuf(d->png))) return util::errorf("image: corrupt PNG: {}", d->message);
  png_set_read_fn(d->png, d.get(), png_read_bytes);
  png_set_user_limits(d->png, 1u << 20, 1u << 20);
  png_set_chunk_malloc_max(d->png, 8u << 20);  // bounds text and ICC chunks of hostile files
  png_read_info(d->png, d->info);
  const uint32_t width = png_get_image_width(d->png, d->info);
  const uint32_t height = png_get_image_height(d->png, d->info);
  if (max_pixels > 0 && static_cast<int64_t>(width) * height > max_pixels)
    return too_large(width, height, max_pixels);
  header->format = ImageFormat::kPng;
  header->width = static_cast<int>(width);
  header->height = static_cast<int>(height);
  if (max_pixels == 0) return Image{};  // header only

  // PIL's convert("RGB"): palette → RGB, gray → RGB, alpha dropped (never composited).
  const int depth = png_get_bit_depth(d->png, d->info);
  const int color = png_get_color_type(d->png, d->info);
  if (depth == 16) png_set_strip_16(d->png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(d->png);
  if ((color & PNG_COLOR_MASK_COLOR) == 0) {
    if (depth < 8) png_set_expand_gray_1_2_4_to_8(d->png);
    png_set_gray_to_rgb(d->png);
  }
  if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(d->png);
  png_set_interlace_handling(d->png);
  png_read_update_info(d->png, d->info);
  if (png_get_channels(d->png, d->info) != 3 ||
      png_get_rowbytes(d->png, d->info) != size_t{width} * 3)
    return util::errorf("image: PNG of an unsupported pixel layout (color type {}, {} bits)", color,
                        depth);
  d->image.width = static_cast<int>(width);
  d->image.height = static_cast<int>(height);
  d->image.rgb.resize(size_t{width} * height * 3);
  d->rows.resize(height);
  for (uint32_t y = 0; y < height; ++y) d->rows[y] = d->image.rgb.data() + size_t{y} * width * 3;
  png_read_image(d->png, d->rows.data());
  png_read_end(d->png, nullptr);
  return std::move(d->image);
}

// --- JPEG --------------------------------------------------------------------------------------

// Progressive files of more scans than this are refused: each scan re-reads the coefficients,
// so a hostile file could otherwise spin for minutes (libjpeg-turbo's TurboJPEG limit).
constexpr int kMaxJpegScans = 500;

struct JpegDecode {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr errors{};
  jpeg_progress_mgr progress{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = "";
  bool started = false;
  Image image;
  ~JpegDecode() {
    if (started) jpeg_destroy_decompress(&cinfo);
  }
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<JpegDecode*>(cinfo->client_data);
  (*cinfo->err->format_message)(cinfo, d->message);
  std::longjmp(d->jump, 1);
}

// Warnings are corrupt data libjpeg would paper over (grey blocks): refused, as PIL refuses a
// truncated file.
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_fail(cinfo);
}

void jpeg_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<JpegDecode*>(cinfo->client_data);
  if (d->cinfo.input_scan_number > kMaxJpegScans) {
    std::snprintf(d->message, sizeof d->message, "more than %d progressive scans", kMaxJpegScans);
    std::longjmp(d->jump, 1);
  }
}

util::Result<Image> decode_jpeg(std::span<const uint8_t> bytes, int64_t max_pixels,
                                ImageHeader* header) {
  auto d = std::make_unique<JpegDecode>();
  d->cinfo.err = jpeg_std_error(&d->errors);
  d->errors.error_exit = jpeg_fail;
  d->errors.emit_message = jpeg_message;
  d->cinfo.client_data = d.get();
  if (setjmp(d->jump)) return util::errorf("image: corrupt JPEG: {}", d->message);
  jpeg_create_decompress(&d->cinfo);
  d->started = true;
  d->progress.progress_monitor = jpeg_progress;
  d->cinfo.progress = &d->progress;
  jpeg_mem_src(&d->cinfo, const_cast<unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&d->cinfo, TRUE);
  const int64_t width = d->cinfo.image_width, height = d->cinfo.image_height;
  if (max_pixels > 0 && width * height > max_pixels) return too_large(width, height, max_pixels);
  header->format = ImageFormat::kJpeg;
  header->width = static_cast<int>(width);
  header->height = static_cast<int>(height);
  if (d->cinfo.jpeg_color_space == JCS_CMYK || d->cinfo.jpeg_color_space == JCS_YCCK)
    return util::errorf("image: CMYK JPEG images are not supported — convert it to RGB");
  if (max_pixels == 0) return Image{};  // header only
  // Progressive files hold every coefficient (2 bytes × 3 components per pixel at most).
  d->cinfo.mem->max_memory_to_use = static_cast<long>(width * height * 6 + (16 << 20));
  d->cinfo.out_color_space = JCS_RGB;  // gray is replicated, as PIL's convert("RGB")
  jpeg_start_decompress(&d->cinfo);
  if (d->cinfo.output_components != 3) return util::errorf("image: JPEG did not decode to RGB");
  d->image.width = static_cast<int>(width);
  d->image.height = static_cast<int>(height);
  d->image.rgb.resize(static_cast<size_t>(width * height * 3));
  while (d->cinfo.output_scanline < d->cinfo.output_height) {
    JSAMPROW row = d->image.rgb.data() + static_cast<size_t>(d->cinfo.output_scanline) * width * 3;
    jpeg_read_scanlines(&d->cinfo, &row, 1);
  }
  jpeg_finish_decompress(&d->cinfo);
  return std::move(d->image);
}

util::Result<Image> decode(std::span<const uint8_t> bytes, int64_t max_pixels,
                           ImageHeader* header) {
  if (bytes.empty()) return util::errorf("image: the file is empty");
  if (is_png(bytes)) return decode_png(bytes, max_pixels, header);
  if (is_jpeg(bytes)) return decode_jpeg(bytes, max_pixels, header);
  return util::errorf(
      "image: not a PNG or JPEG file (headroom reads those two) — convert it first");
}

}  // namespace

std::string_view image_format_name(ImageFormat format) {
  return format == ImageFormat::kPng ? "PNG" : "JPEG";
}

util::Result<ImageHeader> read_image_header(std::span<const uint8_t> bytes, int64_t max_pixels) {
  ImageHeader header;
  // A zero budget asks decode() for the header only; the budget check happens here.
  HR_TRY(decode(bytes, 0, &header));
  if (header.width <= 0 || header.height <= 0)
    return util::errorf("image: the image has no pixels");
  if (header.pixels() > max_pixels) return too_large(header.width, header.height, max_pixels);
  return header;
}

util::Result<Image> decode_image(std::span<const uint8_t> bytes, int64_t max_pixels) {
  HR_TRY(read_image_header(bytes, max_pixels));
  ImageHeader header;
  return decode(bytes, max_pixels, &header);
}

}  // namespace mm
