// Dequantizers against the known answers of ../shared/testdata/quant/, bit for bit, and the
// dispatcher's errors.
#include "tensor/dequantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "known_answers.h"

namespace {

using tensor::DType;
using tensor_test::float_bits;

// Every type with a decoder and a known-answer file.
const std::vector<std::string> kDecodedTypes = {
    "F32",  "F16",  "BF16", "Q4_0",   "Q4_1",   "Q5_0",  "Q5_1",  "Q8_0",  "Q2_K", "Q3_K",
    "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4"};

class KnownAnswerDecode : public testing::TestWithParam<std::string> {};

// Decodes every tensor row by row (as the runtime will) and compares each value's bits with the
// independent decoder's output; the first mismatches name the tensor, index and both values.
TEST_P(KnownAnswerDecode, MatchesIndependentDecoderBitForBit) {
  auto answers = tensor_test::load_known_answers(GetParam());
  ASSERT_TRUE(answers.has_value());
  int64_t compared = 0;
  int reported = 0;
  int64_t mismatches = 0;
  for (const auto& t : answers->tensors) {
    ASSERT_EQ(tensor::dtype_name(t.type), GetParam()) << t.name;
    ASSERT_TRUE(tensor::can_dequantize(t.type));
    const int64_t stride = tensor::row_bytes(t.type, t.row_length);
    std::vector<float> row(static_cast<size_t>(t.row_length));
    for (int64_t r = 0; r < t.n_rows; ++r) {
      auto status =
          tensor::dequantize_row(t.type, t.data.data() + r * stride, row.data(), t.row_length);
      ASSERT_TRUE(status.ok()) << status.error().message();
      for (int64_t i = 0; i < t.row_length; ++i) {
        const int64_t at = t.first_value + r * t.row_length + i;
        const float want = answers->expected[static_cast<size_t>(at)];
        const float got = row[static_cast<size_t>(i)];
        ++compared;
        if (float_bits(want) != float_bits(got)) {
          ++mismatches;
          if (reported++ < 5) {
            ADD_FAILURE() << GetParam() << " " << t.name << " row " << r << " index " << i
                          << ": expected " << want << " (0x" << std::hex << float_bits(want)
                          << ") got " << got << " (0x" << float_bits(got) << std::dec << ")";
          }
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << GetParam() << ": " << mismatches << " of " << compared << " differ";
  EXPECT_EQ(compared, 22528);
}

INSTANTIATE_TEST_SUITE_P(AllDecodedTypes, KnownAnswerDecode, testing::ValuesIn(kDecodedTypes),
                         [](const testing::TestParamInfo<std::string>& p) { return p.param; });

// The F16 file reaches the f16 subnormal range (tensor_c row 1); make sure the data really does,
// so the bit-exact check above covers subnormal decoding.
TEST(Dequantize, F16KnownAnswersIncludeSubnormals) {
  auto answers = tensor_test::load_known_answers("F16");
  ASSERT_TRUE(answers.has_value());
  int subnormals = 0;
  for (const auto& t : answers->tensors) {
    const auto* halves = reinterpret_cast<const uint16_t*>(t.data.data());
    for (int64_t i = 0; i < t.row_length * t.n_rows; ++i) {
      if ((halves[i] & 0x7c00) == 0 && (halves[i] & 0x03ff) != 0) ++subnormals;
    }
  }
  EXPECT_GT(subnormals, 100);
}

TEST(Dequantize, RefusesTypesWithoutDecoderNamingThem) {
  std::vector<uint8_t> bytes(256);
  std::vector<float> out(256);
  for (DType type : {DType::kIQ2_XXS, DType::kIQ1_S, DType::kIQ3_S, DType::kI32, DType::kQ8_1}) {
    EXPECT_FALSE(tensor::can_dequantize(type));
    auto status = tensor::dequantize_row(type, bytes.data(), out.data(), 256);
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.error().message().find(std::string(tensor::dtype_name(type))),
              std::string::npos)
        << status.error().message();
  }
}

TEST(Dequantize, RefusesPartialBlocks) {
  std::vector<uint8_t> bytes(1024);
  std::vector<float> out(300, 7.0f);
  auto status = tensor::dequantize_row(DType::kQ4_K, bytes.data(), out.data(), 300);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("300"), std::string::npos) << status.error().message();
  EXPECT_NE(status.error().message().find("256"), std::string::npos) << status.error().message();
  EXPECT_EQ(out[0], 7.0f);  // untouched
  EXPECT_FALSE(tensor::dequantize_row(DType::kQ8_0, bytes.data(), out.data(), -32).ok());
}

TEST(Dequantize, RefusesMisalignedBlocks) {
  std::vector<uint16_t> storage(512);
  const auto* odd = reinterpret_cast<const uint8_t*>(storage.data()) + 1;
  std::vector<float> out(256);
  EXPECT_FALSE(tensor::dequantize_row(DType::kQ4_K, odd, out.data(), 256).ok());
  // Byte-only blocks have no alignment to keep.
  EXPECT_TRUE(tensor::dequantize_row(DType::kMXFP4, odd, out.data(), 32).ok());
}

TEST(Dequantize, ZeroLengthRowIsANoOp) {
  float out = 3.0f;
  EXPECT_TRUE(tensor::dequantize_row(DType::kQ6_K, nullptr, &out, 0).ok());
  EXPECT_EQ(out, 3.0f);
}

}  // namespace
