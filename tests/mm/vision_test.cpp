// The image path against independent truth: decoding and resizing against PIL (the reference
// image processor's library), target sizes and patching against the reference preprocessor, and
// every stage of the vision encoder against the float64 reference
// (tests/reference/reference_mm.py), on the scalar reference backend, the CPU backend and an
// emulated GPU (device memory).
#include <gtest/gtest.h>

#include <zlib.h>

#include <memory>

#include "kernels/cpu/backend.h"
#include "kernels/ref/ref.h"
#include "mm/image.h"
#include "mm/image_preprocess.h"
#include "mm/projector.h"
#include "mm/vision.h"
#include "mm_testing.h"
#include "testing/emulated_gpu.h"
#include "util/thread_pool.h"

namespace {

using namespace mm_testing;

// Every shipped PNG and JPEG headroom decodes (rose-cmyk.jpg is refused: see below). Between them:
// RGB, RGBA, palette, 8-bit gray, 16-bit RGB and interlaced PNGs; baseline 4:2:0, progressive and
// grayscale JPEGs; sizes that are enlarged and one that is reduced (rose-large.jpg) for 70 tokens;
// one long strip (420×14).
const std::vector<std::string> kImages = {"rose.jpg",
                                          "granite-gray.png",
                                          "logo-palette.png",
                                          "rose-gray.jpg",
                                          "rose-interlaced.png",
                                          "rose-large.jpg",
                                          "rose-progressive.jpg",
                                          "rose-rgb16.png",
                                          "strip.png",
                                          "wizard-rgba.png",
                                          "wizard.png"};

mm::Image image_file(const std::string& name) {
  const auto bytes = testing_util::read_file(data(name));
  auto image = mm::decode_image(bytes);
  EXPECT_TRUE(image.ok()) << name << ": " << (image ? "" : image.error().message());
  return image ? std::move(*image) : mm::Image{};
}

std::vector<float> as_floats(const std::vector<uint8_t>& v) {
  return std::vector<float>(v.begin(), v.end());
}

// PIL's decode, resize and the reference patches for every shipped image, computed once.
class ImagePipeline : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string args = "preprocess";
    for (const auto& name : kImages) args += fmt::format(" {}", data(name).string());
    args += " --budgets 70";
    dump_ = new Dump(read_dump(cached_python("reference_mm.py", args)));
  }
  static void TearDownTestSuite() { delete dump_; }
  static inline Dump* dump_ = nullptr;
};

TEST_F(ImagePipeline, DecodeMatchesPilOnEveryShippedImage) {
  ASSERT_NE(dump_, nullptr);
  for (const auto& name : kImages) {
    const mm::Image image = image_file(name);
    const auto& expected = (*dump_)[name + ".rgb"];
    ASSERT_EQ(expected.size(), image.rgb.size()) << name;
    const Difference d = compare(expected, as_floats(image.rgb));
    EXPECT_EQ(d.max_diff, 0) << name << ": pixel " << d.at << " differs from PIL's";
  }
}

// PIL's bicubic resampling reproduced bit for bit, enlarging and reducing, at the sizes the
// reference preprocessor picks.
TEST_F(ImagePipeline, ResizeMatchesPilBitForBit) {
  ASSERT_NE(dump_, nullptr);
  mm::VisionSpec v;
  v.patch_size = 16;
  v.pooling = 3;
  for (const auto& name : kImages) {
    const mm::Image image = image_file(name);
    auto size = mm::target_size(image.height, image.width, 16, 3, 70);
    ASSERT_TRUE(size.ok()) << name;
    const mm::Image resized = mm::resize_bicubic(image, size->width, size->height);
    const auto& expected = (*dump_)[name + ".70.pixels"];
    ASSERT_EQ(expected.size(), resized.rgb.size())
        << name << ": reference size differs from " << size->width << "x" << size->height;
    const Difference d = compare(expected, as_floats(resized.rgb));
    EXPECT_EQ(d.max_diff, 0) << name << ": resized pixel " << d.at << " differs from PIL's";
  }
}

// Patch layout and values: the reference's patches are (row, column, channel) in [0, 1]; headroom's
// are channel-major per patch (the patch-embedding kernel's column order) and already 2·(x − 0.5).
TEST_F(ImagePipeline, PatchesMatchReferencePreprocessor) {
  ASSERT_NE(dump_, nullptr);
  mm::VisionSpec v;
  v.patch_size = 16;
  v.pooling = 3;
  v.n_positions = 1024;
  const mm::Image image = image_file(kImages[0]);
  auto patches = mm::preprocess_image(image, v, 70);
  ASSERT_TRUE(patches.ok()) << patches.error().message();
  const auto& reference = (*dump_)[kImages[0] + ".70.patches"];
  const int p = 16, values = 3 * p * p;
  ASSERT_EQ(reference.size(), patches->pixels.size());
  std::vector<float> expected(reference.size());
  for (int i = 0; i < patches->n_patches(); ++i) {
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < p; ++y)
        for (int x = 0; x < p; ++x)
          expected[i * values + (c * p + y) * p + x] =
              2.0f * (reference[i * values + (y * p + x) * 3 + c] - 0.5f);
  }
  EXPECT_LE(compare(expected, patches->pixels).max_diff, 1e-6);
  EXPECT_EQ(patches->n_tokens, patches->n_patches() / 9);
  auto count = mm::image_token_count(image.height, image.width, v, 70);
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, patches->n_tokens);
}

// get_aspect_ratio_preserving_size on cases worked by hand from its definition.
TEST(ImagePreprocess, TargetSizeFollowsTheReferenceRule) {
  // 1920×1080 at 280 tokens: 2520 patches of 16² px = 645120 px; factor √(645120/2073600) = 0.5578;
  // 1080·0.5578 = 602.4 → 576 (12·48), 1920·0.5578 = 1071 → 1056 (22·48): 36×66 patches = 264
  // tokens.
  auto s = mm::target_size(1080, 1920, 16, 3, 280);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->height, 576);
  EXPECT_EQ(s->width, 1056);
  // A strip 2000×10 at 70 tokens: the height rounds to 0 → one row of 48 px, width
  // min(floor(2000/10)·48, (630/9)·48 = 3360) = 3360.
  s = mm::target_size(10, 2000, 16, 3, 70);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->height, 48);
  EXPECT_EQ(s->width, 3360);
  EXPECT_FALSE(mm::check_image_tokens(300).ok());
  EXPECT_TRUE(mm::check_image_tokens(1120).ok());
}

// --- Bad input -----------------------------------------------------------------------------------

std::string image_decode_error(std::span<const uint8_t> bytes) {
  auto image = mm::decode_image(bytes);
  EXPECT_FALSE(image.ok());
  if (image) return "";
  const std::string message = image.error().message();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  return message;
}

// Sets a PNG's IHDR size and its checksum (libpng checks it), as a hostile file would.
std::vector<uint8_t> png_with_size(std::vector<uint8_t> png, uint32_t width, uint32_t height) {
  auto put = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) png[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  };
  put(16, width);
  put(20, height);
  put(29, static_cast<uint32_t>(crc32(0, png.data() + 12, 17)));  // over "IHDR" and its 13 bytes
  return png;
}

// Sets a baseline JPEG's frame size (SOF0 marker: FF C0, length, precision, height, width).
std::vector<uint8_t> jpeg_with_size(std::vector<uint8_t> jpeg, uint16_t width, uint16_t height) {
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) {
      jpeg[i + 5] = height >> 8;
      jpeg[i + 6] = height & 0xff;
      jpeg[i + 7] = width >> 8;
      jpeg[i + 8] = width & 0xff;
      return jpeg;
    }
  }
  ADD_FAILURE() << "no SOF0 marker";
  return jpeg;
}

TEST(ImageDecode, RefusesBadImagesInOneLine) {
  const auto jpeg = testing_util::read_file(data("rose.jpg"));
  const auto png = testing_util::read_file(data("wizard.png"));
  EXPECT_NE(image_decode_error({}).find("empty"), std::string::npos);
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  EXPECT_NE(image_decode_error(text).find("not a PNG or JPEG"), std::string::npos);
  EXPECT_NE(image_decode_error(testing_util::read_file(data("rose-cmyk.jpg"))).find("CMYK"),
            std::string::npos);
  // Truncated: the header survives, the pixel data does not.
  EXPECT_NE(image_decode_error(std::span(jpeg).first(jpeg.size() / 2)).find("corrupt JPEG"),
            std::string::npos);
  EXPECT_NE(image_decode_error(std::span(png).first(png.size() / 2)).find("corrupt PNG"),
            std::string::npos);
  EXPECT_NE(image_decode_error(std::span(png).first(20)).find("corrupt PNG"), std::string::npos);
  // Corrupt: compressed data overwritten.
  auto bad_png = png;
  for (size_t i = bad_png.size() / 3; i < bad_png.size() / 3 + 64; ++i) bad_png[i] ^= 0x5a;
  EXPECT_NE(image_decode_error(bad_png).find("corrupt PNG"), std::string::npos);
  // A chunk longer than the file (a fuzzing finding: libpng allocated the tEXt chunk's declared
  // 1 GB before reading it): refused from the chunk headers, before libpng sees the file.
  auto long_text = std::vector<uint8_t>(png.begin(), png.begin() + 33);  // signature and IHDR
  const uint8_t chunk[] = {0x3e, 0x13, 0x00, 0x25, 't', 'E', 'X', 't', 'a', 'b', 'c'};
  long_text.insert(long_text.end(), std::begin(chunk), std::end(chunk));
  const std::string long_error = image_decode_error(long_text);
  EXPECT_NE(long_error.find("corrupt PNG: the tEXt chunk claims 1041432613 bytes"),
            std::string::npos)
      << long_error;
  auto bad_jpeg = jpeg;
  for (size_t i = bad_jpeg.size() / 2; i < bad_jpeg.size() / 2 + 64; ++i) bad_jpeg[i] = 0xff;
  EXPECT_NE(image_decode_error(bad_jpeg).find("corrupt JPEG"), std::string::npos);
  // Enormous: refused from the header, before any pixel is decoded.
  EXPECT_NE(image_decode_error(png_with_size(png, 100000, 100000)).find("megapixels"),
            std::string::npos);
  EXPECT_NE(image_decode_error(jpeg_with_size(jpeg, 60000, 60000)).find("megapixels"),
            std::string::npos);
  auto header = mm::read_image_header(jpeg);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->width, 280);
  EXPECT_EQ(header->height, 184);
}

// --- The encoder --------------------------------------------------------------------------------

struct EncoderCase {
  std::string name;
  std::string synth;    // synth_mmproj.py options
  std::string backend;  // ref, cpu, emulated-gpu
  double tolerance;     // max |Δ| / max |reference| at every stage
};
void PrintTo(const EncoderCase& c, std::ostream* os) {
  *os << c.name;
}

class VisionStages : public ::testing::TestWithParam<EncoderCase> {};

// Each stage of headroom's encoder against the reference run on the same image and weights.
TEST_P(VisionStages, MatchReference) {
  const EncoderCase& c = GetParam();
  const fs::path proj = tiny_projector(c.synth);
  const Dump ref = read_dump(cached_python(
      "reference_mm.py",
      fmt::format("image {} {} --image-tokens 70", proj.string(), data("rose.jpg").string())));

  auto file = gguf::File::open(proj.string());
  ASSERT_TRUE(file.ok()) << file.error().message();
  auto spec = mm::projector_from_gguf(*file);
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  ASSERT_TRUE(spec->vision.has_value());

  util::ThreadPool pool(2);
  std::unique_ptr<kernels::Backend> backend;
  if (c.backend == "ref") backend = std::make_unique<kernels::ref::RefBackend>();
  if (c.backend == "cpu") backend = std::make_unique<kernels::cpu::CpuBackend>(pool, 64, 1024);
  if (c.backend == "emulated-gpu")
    backend = std::make_unique<testing_util::EmulatedGpu>(pool, 64, 1024);
  auto encoder = mm::VisionEncoder::load(*file, *spec, *backend, 70);
  ASSERT_TRUE(encoder.ok()) << encoder.error().message();

  const mm::Image image = image_file("rose.jpg");
  auto patches = mm::preprocess_image(image, *spec->vision, 70);
  ASSERT_TRUE(patches.ok()) << patches.error().message();
  std::map<std::string, std::vector<float>> stages;
  std::vector<float> out(static_cast<size_t>(patches->n_tokens) * spec->n_embd_text);
  auto status = (*encoder)->encode(*patches, out,
                                   [&](std::string_view name, std::span<const float> v, int64_t) {
                                     stages[std::string(name)].assign(v.begin(), v.end());
                                   });
  ASSERT_TRUE(status.ok()) << status.error().message();
  std::vector<std::string> names = {"patch_embd"};
  for (int il = 0; il < spec->vision->n_layer; ++il) names.push_back(fmt::format("blk.{}.out", il));
  names.insert(names.end(), {"pooled", "projected"});
  for (const auto& name : names)
    expect_close(c.name + " " + name, ref[name], stages[name], c.tolerance);
  expect_close(c.name + " output", ref["projected"], out, c.tolerance);
}

// f32 encoder against the f64 reference: rounding of f32 sums over ≤ 768 terms through 2 blocks
// of attention and norms gives ~1e-6 relative; 1e-5 leaves room while any wrong step (a missing
// norm, swapped RoPE halves, row/column positions swapped, channel order) moves values by > 0.1.
INSTANTIATE_TEST_SUITE_P(
    Backends, VisionStages,
    ::testing::Values(EncoderCase{"f32_clamped_ref", "--clamp", "ref", 1e-5},
                      EncoderCase{"f32_clamped_cpu", "--clamp", "cpu", 1e-5},
                      EncoderCase{"f32_clamped_emulated_gpu", "--clamp", "emulated-gpu", 1e-5},
                      // F16 weights: the reference dequantizes the same bytes, so only arithmetic
                      // differs (the CPU kernels convert activations to f32 for f16 rows).
                      EncoderCase{"f16_clamped_cpu", "--clamp --type f16", "cpu", 1e-5}),
    [](const auto& p) { return p.param.name; });

TEST(ProjectorSpec, ReadsTheConvertersLayout) {
  auto file = gguf::File::open(tiny_projector("").string());
  ASSERT_TRUE(file.ok());
  auto spec = mm::projector_from_gguf(*file);
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->n_embd_text, 128);
  ASSERT_TRUE(spec->vision && spec->audio);
  EXPECT_EQ(spec->vision->n_embd, 48);
  EXPECT_EQ(spec->vision->n_head, 3);
  EXPECT_EQ(spec->vision->head_dim, 16);
  EXPECT_EQ(spec->vision->patch_size, 16);
  EXPECT_EQ(spec->vision->pooling, 3);
  EXPECT_EQ(spec->vision->n_positions, 64);
  EXPECT_TRUE(spec->vision->standardize);
  EXPECT_FALSE(spec->vision->clipped);
  EXPECT_EQ(spec->audio->n_embd, 64);
  EXPECT_EQ(spec->audio->head_dim, 16);
  EXPECT_EQ(spec->audio->conv_channels[0], 128);
  EXPECT_EQ(spec->audio->conv_channels[1], 4);
  EXPECT_EQ(spec->audio->n_freq_sub, 32);
  EXPECT_EQ(spec->audio->conv_kernel, 5);
  EXPECT_EQ(spec->audio->n_out, 96);

  model::Spec text;
  text.arch = model::Arch::kGemma4;
  text.n_embd = 128;
  EXPECT_TRUE(mm::check_projector_fits(*spec, text, "tiny").ok());
  text.n_embd = 256;
  auto wrong = mm::check_projector_fits(*spec, text, "tiny");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message().find("128 wide"), std::string::npos) << wrong.error().message();
  text.arch = model::Arch::kLlama;
  EXPECT_FALSE(mm::check_projector_fits(*spec, text, "tiny").ok());
}

TEST(ProjectorSpec, RefusesWhatIsNotAGemma4Projector) {
  auto text = gguf::File::open((testing_util::source_dir() / "models/stories260K.gguf").string());
  ASSERT_TRUE(text.ok());
  auto spec = mm::projector_from_gguf(*text);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message().find("not 'clip'"), std::string::npos) << spec.error().message();
}

}  // namespace
