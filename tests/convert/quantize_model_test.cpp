// quantize_model on stories260K (a real trained model) and on small files written here: every
// file type writes a valid GGUF with the source's metadata whose tensors decode close to the
// source, threads do not change a byte, and bad input leaves nothing behind.
#include "convert/quantize_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "tensor/dequantize.h"
#include "tensor/quantize.h"
#include "testing/testing.h"

namespace {

using convert::DType;

using testing_util::stories_model;

convert::QuantizeOptions options_for(std::string_view type) {
  convert::QuantizeOptions o;
  o.mix.file_type = *convert::parse_file_type(type);
  return o;
}

std::vector<float> decode(const gguf::TensorInfo& t) {
  std::vector<float> out(t.n_elements);
  EXPECT_TRUE(
      tensor::dequantize_row(t.type, t.data.data(), out.data(), static_cast<int64_t>(t.n_elements))
          .ok());
  return out;
}

// Relative RMS error of each type on the shared known-answer data (testdata/quant/README.md):
// adversarial data (outliers, mixed magnitudes), so trained weights must do no worse.
double reference_relative_rms(DType type) {
  switch (type) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 0.0002015;
    case DType::kBF16:
      return 0.00161;
    case DType::kQ8_0:
      return 0.004959;
    case DType::kQ6_K:
      return 0.01367;
    case DType::kQ5_1:
      return 0.02833;
    case DType::kQ5_0:
      return 0.03607;
    case DType::kQ5_K:
      return 0.02493;
    case DType::kQ4_1:
      return 0.05153;
    case DType::kQ4_0:
      return 0.07087;
    case DType::kQ4_K:
      return 0.04633;
    case DType::kIQ4_NL:
      return 0.06505;
    case DType::kIQ4_XS:
      return 0.06715;
    case DType::kQ3_K:
      return 0.1121;
    case DType::kQ2_K:
      return 0.1441;
    case DType::kMXFP4:
      return 0.1113;
    case DType::kNVFP4:
      return 0.06739;
    case DType::kTQ1_0:
    case DType::kTQ2_0:
      return 0.5937;
    default:
      return 0;
  }
}

class QuantizeStories : public testing::TestWithParam<std::string> {};

TEST_P(QuantizeStories, WritesValidGgufWithSourceMetadataAndCloseValues) {
  const auto dir = testing_util::temp_dir();
  const std::string out = (dir / "out.gguf").string();
  util::ThreadPool pool(2);
  const auto options = options_for(GetParam());
  auto result = convert::quantize_model(stories_model(), out, options, pool, {});
  ASSERT_TRUE(result.ok()) << result.error().message();
  auto source = gguf::File::open(stories_model());
  auto written = gguf::File::open(out);
  ASSERT_TRUE(source.ok() && written.ok()) << (written.ok() ? "" : written.error().message());
  // Every key of the source, with its value, plus the file type.
  for (const gguf::KeyValue& kv : source->metadata()) {
    if (kv.key == "general.file_type") continue;
    const gguf::Value* v = written->find(kv.key);
    ASSERT_NE(v, nullptr) << kv.key;
    EXPECT_TRUE(gguf::MetaValue::from(*v) == gguf::MetaValue::from(kv.value)) << kv.key;
  }
  EXPECT_EQ(*written->get_u64("general.file_type").value(), options.mix.file_type.code);
  EXPECT_EQ(*written->get_u64("general.quantization_version").value(), 2u);
  // Same tensors, in the planned types, decoding close to the source.
  ASSERT_EQ(written->tensors().size(), source->tensors().size());
  for (size_t i = 0; i < source->tensors().size(); ++i) {
    const gguf::TensorInfo& s = source->tensors()[i];
    const gguf::TensorInfo& w = written->tensors()[i];
    ASSERT_EQ(s.name, w.name);
    EXPECT_EQ(s.ne, w.ne) << s.name;
    EXPECT_EQ(w.type, result->choices[i].type) << s.name;
    const std::vector<float> a = decode(s);
    const std::vector<float> b = decode(w);
    // The bytes are the row quantizer's (checked byte for byte against llama.cpp's files in
    // tests/tensor/): the pipeline neither reorders, drops nor mixes rows.
    std::vector<uint8_t> expected(w.n_bytes);
    const int64_t ne0 = static_cast<int64_t>(s.ne[0]);
    for (uint64_t r = 0; r < s.n_rows(); ++r) {
      ASSERT_TRUE(
          tensor::quantize_row(w.type, a.data() + r * ne0, expected.data() + r * w.row_bytes(), ne0)
              .ok());
    }
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), w.data.begin())) << s.name;
    double err = 0, norm = 0;
    for (size_t j = 0; j < a.size(); ++j) {
      err += (double(a[j]) - b[j]) * (double(a[j]) - b[j]);
      norm += double(a[j]) * a[j];
    }
    const double rel = std::sqrt(err / norm);
    // And a sanity bound: no worse than twice the type's error on the adversarial shared data.
    EXPECT_LE(rel, 2 * reference_relative_rms(w.type) + 1e-9)
        << s.name << " as " << tensor::dtype_name(w.type);
  }
  // Nothing else left in the directory (the temporary file was renamed).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
}

INSTANTIATE_TEST_SUITE_P(FileTypes, QuantizeStories,
                         testing::Values("F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_0", "Q4_K_M",
                                         "Q4_K_S", "Q4_0", "Q4_1", "IQ4_XS", "Q3_K_M", "Q2_K",
                                         "MXFP4_MOE", "NVFP4"),
                         [](const auto& p) { return p.param; });

// A 2-D F32 model of the given tensors (llama metadata), written with the writer.
std::string write_model(const std::filesystem::path& dir,
                        const std::vector<std::vector<float>>& data,
                        const std::vector<std::array<uint64_t, 2>>& shapes) {
  gguf::Writer w;
  w.set("general.architecture", gguf::MetaValue::string("llama"));
  w.set("llama.block_count", gguf::MetaValue::u32(1));
  for (size_t i = 0; i < data.size(); ++i) {
    w.add_tensor("blk.0.t" + std::to_string(i) + ".weight", gguf::TensorType::kF32,
                 {shapes[i][0], shapes[i][1]},
                 std::span(reinterpret_cast<const uint8_t*>(data[i].data()), data[i].size() * 4));
  }
  const std::string path = (dir / "in.gguf").string();
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

std::vector<float> wave(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i));
  return v;
}

TEST(QuantizeModel, ThreadsDoNotChangeAByte) {
  const auto dir = testing_util::temp_dir();
  const std::string in =
      write_model(dir, {wave(256 * 300, 1.0f), wave(512 * 7, 0.1f)}, {{256, 300}, {512, 7}});
  util::ThreadPool one(1), two(2);
  ASSERT_TRUE(
      convert::quantize_model(in, (dir / "a.gguf").string(), options_for("Q4_K_M"), one, {}).ok());
  ASSERT_TRUE(
      convert::quantize_model(in, (dir / "b.gguf").string(), options_for("Q4_K_M"), two, {}).ok());
  EXPECT_TRUE(testing_util::read_file(dir / "a.gguf") == testing_util::read_file(dir / "b.gguf"));
}

TEST(QuantizeModel, ReportsProgressForEveryTensor) {
  const auto dir = testing_util::temp_dir();
  const std::string in =
      write_model(dir, {wave(256 * 64, 1.0f), wave(256 * 2, 1.0f)}, {{256, 64}, {256, 2}});
  util::ThreadPool pool(2);
  std::vector<std::pair<size_t, double>> seen;
  auto r = convert::quantize_model(in, (dir / "o.gguf").string(), options_for("Q8_0"), pool,
                                   [&](const convert::WriteProgress& p) {
                                     EXPECT_EQ(p.count, 2u);
                                     seen.emplace_back(p.index, p.fraction);
                                   });
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), (std::pair<size_t, double>{0, 0.0}));
  EXPECT_EQ(seen.back(), (std::pair<size_t, double>{1, 1.0}));
}

// A NaN in the last tensor fails the write after the first tensor was written: the error names
// the tensor, and no output (not even a temporary file) is left — an existing output survives.
TEST(QuantizeModel, FailureLeavesNothingHalfWritten) {
  const auto dir = testing_util::temp_dir();
  std::vector<float> bad = wave(256 * 4, 1.0f);
  bad[300] = std::numeric_limits<float>::quiet_NaN();
  const std::string in = write_model(dir, {wave(256 * 4, 1.0f), bad}, {{256, 4}, {256, 4}});
  const auto out = dir / "out.gguf";
  util::ThreadPool pool(2);
  auto r = convert::quantize_model(in, out.string(), options_for("Q4_K_M"), pool, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("blk.0.t1.weight"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("row 1"), std::string::npos) << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // just in.gguf
  // An existing file under the output name is left as it was.
  std::filesystem::copy_file(in, out);
  ASSERT_FALSE(convert::quantize_model(in, out.string(), options_for("Q4_K_M"), pool, {}).ok());
  EXPECT_TRUE(testing_util::read_file(out) == testing_util::read_file(in));
}

TEST(QuantizeModel, RefusesToRequantizeUnlessAsked) {
  const auto dir = testing_util::temp_dir();
  util::ThreadPool pool(2);
  const std::string q8 = (dir / "q8.gguf").string();
  ASSERT_TRUE(convert::quantize_model(stories_model(), q8, options_for("Q8_0"), pool, {}).ok());
  auto r = convert::quantize_model(q8, (dir / "q4.gguf").string(), options_for("Q4_0"), pool, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("--allow-requantize"), std::string::npos)
      << r.error().message();
  auto again = options_for("Q4_0");
  again.allow_requantize = true;
  EXPECT_TRUE(convert::quantize_model(q8, (dir / "q4.gguf").string(), again, pool, {}).ok());
}

// The shared importance matrix (made for the known-answer tensors) on a model with those names:
// used, recorded in the metadata, and refused with the tensor's name where sizes disagree.
TEST(QuantizeModel, UsesImportanceMatrixAndChecksItFits) {
  const auto dir = testing_util::temp_dir();
  gguf::Writer w;
  w.set("general.architecture", gguf::MetaValue::string("llama"));
  const std::vector<float> a = wave(256 * 4, 1.0f), b = wave(512 * 3, 2.0f);
  w.add_tensor("tensor_a.weight", gguf::TensorType::kF32, {256, 4},
               std::span(reinterpret_cast<const uint8_t*>(a.data()), a.size() * 4));
  w.add_tensor("tensor_b.weight", gguf::TensorType::kF32, {512, 3},
               std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size() * 4));
  const std::string in = (dir / "in.gguf").string();
  ASSERT_TRUE(w.write(in).ok());
  util::ThreadPool pool(2);
  auto options = options_for("Q4_K_M");
  options.imatrix_path = (testing_util::shared_dir() / "testdata/quant/imatrix.gguf").string();
  const std::string out = (dir / "out.gguf").string();
  auto r = convert::quantize_model(in, out, options, pool, {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->totals.n_without_importance, 0);
  auto file = gguf::File::open(out);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file->get_string("quantize.imatrix.dataset").value(),
            "synthetic-gaussian-activations");
  EXPECT_EQ(*file->get_u64("quantize.imatrix.entries_count").value(), 5u);
  // Without the imatrix the bytes differ (it was used).
  auto plain = options_for("Q4_K_M");
  ASSERT_TRUE(convert::quantize_model(in, (dir / "plain.gguf").string(), plain, pool, {}).ok());
  EXPECT_FALSE(testing_util::read_file(out) == testing_util::read_file(dir / "plain.gguf"));

  // tensor_b with 256 columns: the imatrix's 512 do not fit.
  gguf::Writer w2;
  w2.set("general.architecture", gguf::MetaValue::string("llama"));
  w2.add_tensor("tensor_b.weight", gguf::TensorType::kF32, {256, 6},
                std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size() * 4));
  const std::string in2 = (dir / "in2.gguf").string();
  ASSERT_TRUE(w2.write(in2).ok());
  auto bad = convert::quantize_model(in2, (dir / "bad.gguf").string(), options, pool, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("tensor_b.weight"), std::string::npos)
      << bad.error().message();
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.gguf"));
}

TEST(QuantizeModel, BadInputIsOneLineNamingTheFile) {
  const auto dir = testing_util::temp_dir();
  util::ThreadPool pool(1);
  auto missing = convert::quantize_model((dir / "nope.gguf").string(), (dir / "o.gguf").string(),
                                         options_for("Q8_0"), pool, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("nope.gguf"), std::string::npos);
  EXPECT_EQ(missing.error().message().find('\n'), std::string::npos);
  auto options = options_for("Q8_0");
  options.imatrix_path = stories_model();  // a GGUF, but not an imatrix
  auto not_imatrix =
      convert::quantize_model(stories_model(), (dir / "o.gguf").string(), options, pool, {});
  ASSERT_FALSE(not_imatrix.ok());
  EXPECT_NE(not_imatrix.error().message().find("not an importance matrix"), std::string::npos)
      << not_imatrix.error().message();
}

}  // namespace
