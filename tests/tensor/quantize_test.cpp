// Quantizers against the GGUF reference quantizer's output in ../shared/testdata/quant/: the error
// must be as low as the reference's, and the bytes identical where the file was written by the
// plain reference row quantizer. Plus Q8_K's invariants and the dispatcher's errors.
#include "tensor/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "known_answers.h"
#include "tensor/dequantize.h"

namespace {

using tensor::DType;

// Quantizes one tensor of the known-answer set from the shared source values, row by row.
std::vector<uint8_t> quantize_tensor(const tensor_test::KnownAnswers& answers,
                                     const tensor_test::KnownAnswerTensor& t) {
  const int64_t stride = tensor::row_bytes(t.type, t.row_length);
  std::vector<uint8_t> out(static_cast<size_t>(stride * t.n_rows));
  for (int64_t r = 0; r < t.n_rows; ++r) {
    const float* src = answers.source.data() + t.first_value + r * t.row_length;
    auto status = tensor::quantize_row(t.type, src, out.data() + r * stride, t.row_length);
    EXPECT_TRUE(status.ok()) << status.error().message();
  }
  return out;
}

std::vector<float> dequantize_tensor(const tensor_test::KnownAnswerTensor& t,
                                     const std::vector<uint8_t>& bytes) {
  std::vector<float> out(static_cast<size_t>(t.row_length * t.n_rows));
  auto status = tensor::dequantize_row(t.type, bytes.data(), out.data(), t.row_length * t.n_rows);
  EXPECT_TRUE(status.ok()) << status.error().message();
  return out;
}

struct QuantizeCase {
  std::string type;
  // Whether our bytes equal the file's. The README lists BF16, Q4_0 .. Q8_0, the K-quants,
  // IQ4_XS, TQ1_0, TQ2_0, MXFP4 and NVFP4 as written by the C reference row quantizer, F16 as
  // equal to the Python package's quantizer (plain round-to-nearest-even), and IQ4_NL as written
  // by the file quantizer (which headroom's IQ4_NL follows).
  bool bytes_match_reference;
};

// Every type headroom decodes (the types the CPU kernels read), each against its reference file.
const std::vector<QuantizeCase> kQuantizeCases = {
    {"F16", true},   {"BF16", true},  {"Q4_0", true},   {"Q4_1", true},   {"Q5_0", true},
    {"Q5_1", true},  {"Q8_0", true},  {"Q2_K", true},   {"Q3_K", true},   {"Q4_K", true},
    {"Q5_K", true},  {"Q6_K", true},  {"IQ4_NL", true}, {"IQ4_XS", true}, {"TQ1_0", true},
    {"TQ2_0", true}, {"MXFP4", true}, {"NVFP4", true},
};

void PrintTo(const QuantizeCase& c, std::ostream* os) {
  *os << c.type;
}

class KnownAnswerQuantize : public testing::TestWithParam<QuantizeCase> {};

// RMS error of our round trip against the source must not exceed the reference file's by more
// than 1%.
TEST_P(KnownAnswerQuantize, ErrorIsNoWorseThanReference) {
  auto answers = tensor_test::load_known_answers(GetParam().type);
  ASSERT_TRUE(answers.has_value());
  double ours = 0;
  double reference = 0;
  for (const auto& t : answers->tensors) {
    ASSERT_TRUE(tensor::can_quantize(t.type));
    const std::vector<float> decoded = dequantize_tensor(t, quantize_tensor(*answers, t));
    double ours_t = 0;
    double reference_t = 0;
    for (size_t i = 0; i < decoded.size(); ++i) {
      const double src = answers->source[t.first_value + i];
      ours_t += (decoded[i] - src) * (decoded[i] - src);
      reference_t += (answers->expected[t.first_value + i] - src) *
                     (answers->expected[t.first_value + i] - src);
    }
    ours += ours_t;
    reference += reference_t;
    const double n = static_cast<double>(decoded.size());
    RecordProperty(t.name + ".rms", std::to_string(std::sqrt(ours_t / n)));
    RecordProperty(t.name + ".reference_rms", std::to_string(std::sqrt(reference_t / n)));
  }
  const double n = static_cast<double>(answers->source.size());
  const double rms = std::sqrt(ours / n);
  const double reference_rms = std::sqrt(reference / n);
  EXPECT_LE(rms, 1.01 * reference_rms)
      << GetParam().type << ": rms " << rms << " vs reference " << reference_rms;
  EXPECT_GT(rms, 0.0);  // every type here is lossy on this data: zero error means no work done
}

// Byte-for-byte comparison with the file. Reports the first differing blocks either way; asserts
// equality for the types marked above.
TEST_P(KnownAnswerQuantize, BytesMatchReferenceQuantizer) {
  auto answers = tensor_test::load_known_answers(GetParam().type);
  ASSERT_TRUE(answers.has_value());
  int64_t blocks = 0;
  int64_t differing = 0;
  for (const auto& t : answers->tensors) {
    const std::vector<uint8_t> ours = quantize_tensor(*answers, t);
    ASSERT_EQ(ours.size(), t.data.size()) << t.name;
    const auto& info = gguf::tensor_type_info(t.type);
    const size_t block_bytes = info.block_bytes;
    for (size_t at = 0; at < ours.size(); at += block_bytes) {
      ++blocks;
      if (std::equal(ours.begin() + at, ours.begin() + at + block_bytes, t.data.begin() + at)) {
        continue;
      }
      if (differing++ < 3 && GetParam().bytes_match_reference) {
        ADD_FAILURE() << GetParam().type << " " << t.name << ": block " << at / block_bytes
                      << " (value " << at / block_bytes * info.block_size
                      << ") differs from the reference quantizer's bytes";
      }
    }
  }
  RecordProperty("differing_blocks", std::to_string(differing));
  if (GetParam().bytes_match_reference) {
    EXPECT_EQ(differing, 0) << GetParam().type << ": " << differing << " of " << blocks
                            << " blocks differ";
  }
}

INSTANTIATE_TEST_SUITE_P(AllQuantizedTypes, KnownAnswerQuantize, testing::ValuesIn(kQuantizeCases),
                         [](const testing::TestParamInfo<QuantizeCase>& p) {
                           return p.param.type;
                         });

// Q8_K: bsums are the sums of each 16 quants, q stays in -127..127, and the round trip is within
// half a step of the source.
TEST(QuantizeQ8K, BlockSumsAndErrorBound) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> src(4 * 256);
  for (size_t i = 0; i < src.size(); ++i) src[i] = normal(rng) * (i < 256 ? 1e-3f : 3.0f);
  src[300] = -40.0f;  // the anchor of block 1 is negative
  std::vector<tensor::BlockQ8_K> blocks(4);
  ASSERT_TRUE(tensor::quantize_row(DType::kQ8_K, src.data(), blocks.data(), 1024).ok());
  std::vector<float> back(1024);
  ASSERT_TRUE(tensor::dequantize_row(DType::kQ8_K, blocks.data(), back.data(), 1024).ok());
  for (int b = 0; b < 4; ++b) {
    const auto& block = blocks[static_cast<size_t>(b)];
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += block.qs[16 * k + i];
      EXPECT_EQ(block.bsums[k], sum) << "block " << b << " group " << k;
    }
    float amax = 0;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(src[256 * b + i]));
    EXPECT_NEAR(std::fabs(block.d) * 127, amax, amax * 1e-6f) << "block " << b;
    for (int i = 0; i < 256; ++i) {
      EXPECT_GE(block.qs[i], -127);
      const size_t at = static_cast<size_t>(256 * b + i);
      EXPECT_LE(std::fabs(back[at] - src[at]), 0.5f * std::fabs(block.d) * 1.0001f) << at;
    }
  }
  // The extreme value always lands on -127 (d carries its sign): here -40 with d > 0.
  EXPECT_EQ(blocks[1].qs[300 - 256], -127);
  EXPECT_GT(blocks[1].d, 0.0f);
}

TEST(QuantizeQ8K, AllZeroBlockIsAllZero) {
  std::vector<float> src(256, 0.0f);
  tensor::BlockQ8_K block;
  std::memset(&block, 0xab, sizeof block);
  ASSERT_TRUE(tensor::quantize_row(DType::kQ8_K, src.data(), &block, 256).ok());
  EXPECT_EQ(block.d, 0.0f);
  for (int k = 0; k < 16; ++k) EXPECT_EQ(block.bsums[k], 0);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(block.qs[i], 0);
}

// All-zero blocks decode to zeros for every block type (no 0/0 in the scale searches).
// Every block type headroom writes, with and without importance (the importance-weighted
// searches are separate code).
std::vector<std::pair<DType, const float*>> block_types_with_and_without_importance(
    const std::vector<float>& importance) {
  std::vector<std::pair<DType, const float*>> out;
  for (const auto& c : kQuantizeCases) {
    const DType type = *gguf::tensor_type_from_name(c.type);
    if (type == DType::kF16 || type == DType::kBF16) continue;
    out.emplace_back(type, nullptr);
    if (tensor::uses_importance(type)) out.emplace_back(type, importance.data());
  }
  out.emplace_back(DType::kQ8_K, nullptr);
  return out;
}

TEST(Quantize, ZeroRowsRoundTripToZero) {
  const std::vector<float> importance(512, 1.0f);
  for (auto [type, imp] : block_types_with_and_without_importance(importance)) {
    std::vector<float> src(512, 0.0f);
    std::vector<uint8_t> bytes(static_cast<size_t>(tensor::row_bytes(type, 512)), 0xcd);
    std::vector<float> back(512, 1.0f);
    ASSERT_TRUE(tensor::quantize_row(type, src.data(), bytes.data(), 512, imp).ok());
    ASSERT_TRUE(tensor::dequantize_row(type, bytes.data(), back.data(), 512).ok());
    for (float v : back) ASSERT_EQ(v, 0.0f) << tensor::dtype_name(type) << (imp ? " weighted" : "");
  }
}

// Blocks of f32 subnormals: 1 / d overflows inside the simple quantizers, and the f16 scales round
// to 0. Every type must still write a block that decodes to (nearly) the source, i.e. 0.
TEST(Quantize, SubnormalBlocksDecodeToZero) {
  const std::vector<float> importance(256, 1.0f);
  for (auto [type, imp] : block_types_with_and_without_importance(importance)) {
    std::vector<float> src(256);
    for (size_t i = 0; i < src.size(); ++i) {
      src[i] = (i % 3 == 0 ? -1.0f : 1.0f) * 1e-39f * static_cast<float>(i % 7);
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(tensor::row_bytes(type, 256)));
    std::vector<float> back(256, 1.0f);
    ASSERT_TRUE(tensor::quantize_row(type, src.data(), bytes.data(), 256, imp).ok());
    ASSERT_TRUE(tensor::dequantize_row(type, bytes.data(), back.data(), 256).ok());
    for (size_t i = 0; i < back.size(); ++i) {
      ASSERT_LE(std::fabs(back[i] - src[i]), 1e-38f)
          << tensor::dtype_name(type) << (imp ? " weighted " : " ") << i;
    }
  }
}

TEST(Quantize, RefusesNonFiniteValuesNamingTheIndex) {
  std::vector<float> src(256, 0.5f);
  src[77] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint8_t> bytes(static_cast<size_t>(tensor::row_bytes(DType::kQ4_K, 256)));
  auto status = tensor::quantize_row(DType::kQ4_K, src.data(), bytes.data(), 256);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("index 77"), std::string::npos)
      << status.error().message();
  // F16 stores inf and nan as they are.
  std::vector<uint16_t> halves(256);
  src[3] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(tensor::quantize_row(DType::kF16, src.data(), halves.data(), 256).ok());
  EXPECT_EQ(halves[3], 0x7c00);
  EXPECT_EQ(halves[77] & 0x7c00, 0x7c00);
  EXPECT_NE(halves[77] & 0x03ff, 0);
}

TEST(Quantize, RefusesTypesWithoutEncoderAndPartialBlocks) {
  std::vector<float> src(256, 1.0f);
  std::vector<uint8_t> bytes(1024);
  for (DType type : {DType::kIQ2_XXS, DType::kIQ3_S, DType::kIQ1_M}) {
    EXPECT_FALSE(tensor::can_quantize(type));
    auto status = tensor::quantize_row(type, src.data(), bytes.data(), 256);
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.error().message().find(std::string(tensor::dtype_name(type))),
              std::string::npos)
        << status.error().message();
  }
  EXPECT_FALSE(tensor::quantize_row(DType::kQ8_0, src.data(), bytes.data(), 48).ok());
}

// The importance matrix of the known-answer set (imatrix.gguf, llama.cpp's format): per tensor,
// in_sum2 / counts, the mean squared activation of each column.
std::vector<float> load_importance(const gguf::File& file, const std::string& tensor) {
  const gguf::TensorInfo* sums = file.find_tensor(tensor + ".in_sum2");
  const gguf::TensorInfo* counts = file.find_tensor(tensor + ".counts");
  EXPECT_TRUE(sums && counts) << tensor;
  if (!sums || !counts) return {};
  float count;
  std::memcpy(&count, counts->data.data(), sizeof count);
  std::vector<float> out(sums->n_elements);
  std::memcpy(out.data(), sums->data.data(), out.size() * sizeof(float));
  for (float& v : out) v /= count;
  return out;
}

// With importance, each type's error weighted by that importance is lower than without it, over
// the known-answer tensors: the weighting does what it is for. (No reference file quantizes
// these types with an importance matrix, so bytes cannot be compared.)
TEST(QuantizeImportance, LowersTheImportanceWeightedError) {
  auto imatrix = gguf::File::open((tensor_test::known_answer_dir() / "imatrix.gguf").string());
  ASSERT_TRUE(imatrix.ok()) << imatrix.error().message();
  auto answers = tensor_test::load_known_answers("F32");
  ASSERT_TRUE(answers.has_value());
  for (const auto& c : kQuantizeCases) {
    const DType type = *gguf::tensor_type_from_name(c.type);
    if (!tensor::uses_importance(type)) continue;
    double plain = 0;
    double weighted = 0;
    for (const auto& t : answers->tensors) {
      const std::vector<float> importance = load_importance(*imatrix, t.name);
      ASSERT_EQ(static_cast<int64_t>(importance.size()), t.row_length) << t.name;
      const int64_t stride = tensor::row_bytes(type, t.row_length);
      std::vector<uint8_t> bytes(static_cast<size_t>(stride));
      std::vector<float> back(static_cast<size_t>(t.row_length));
      for (int64_t r = 0; r < t.n_rows; ++r) {
        const float* src = answers->source.data() + t.first_value + r * t.row_length;
        for (const float* imp : {static_cast<const float*>(nullptr), importance.data()}) {
          ASSERT_TRUE(tensor::quantize_row(type, src, bytes.data(), t.row_length, imp).ok());
          ASSERT_TRUE(tensor::dequantize_row(type, bytes.data(), back.data(), t.row_length).ok());
          double error = 0;
          for (int64_t i = 0; i < t.row_length; ++i) {
            const double d = back[static_cast<size_t>(i)] - src[i];
            error += importance[static_cast<size_t>(i)] * d * d;
          }
          (imp ? weighted : plain) += error;
        }
      }
    }
    RecordProperty(c.type + ".plain", std::to_string(plain));
    RecordProperty(c.type + ".weighted", std::to_string(weighted));
    EXPECT_LT(weighted, 0.98 * plain)
        << c.type << ": weighted error " << weighted << " vs plain " << plain;
  }
}

}  // namespace
