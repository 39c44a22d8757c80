// Row gather against the known answers: gathered rows equal the same rows of the independent full
// decode, for several types; bad ids and shapes are refused before anything is written.
#include "tensor/gather.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "known_answers.h"

namespace {

using tensor::DType;
using tensor_test::float_bits;

class GatherKnownAnswers : public testing::TestWithParam<std::string> {};

TEST_P(GatherKnownAnswers, RowsEqualFullDecode) {
  auto answers = tensor_test::load_known_answers(GetParam());
  ASSERT_TRUE(answers.has_value());
  for (const auto& t : answers->tensors) {
    // Repeats, reverse order and both ends of the matrix.
    std::vector<int32_t> ids = {static_cast<int32_t>(t.n_rows - 1), 0, 1, 0};
    std::vector<float> out(ids.size() * static_cast<size_t>(t.row_length));
    auto status = tensor::gather_rows(t.type, t.data, t.row_length, ids, out.data());
    ASSERT_TRUE(status.ok()) << status.error().message();
    for (size_t k = 0; k < ids.size(); ++k) {
      for (int64_t i = 0; i < t.row_length; ++i) {
        const float want = answers->expected[t.first_value + ids[k] * t.row_length + i];
        const float got = out[k * static_cast<size_t>(t.row_length) + static_cast<size_t>(i)];
        ASSERT_EQ(float_bits(got), float_bits(want))
            << GetParam() << " " << t.name << " row " << ids[k] << " index " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SeveralTypes, GatherKnownAnswers,
                         testing::Values("F32", "F16", "BF16", "Q4_0", "Q8_0", "Q4_K", "Q6_K",
                                         "IQ4_XS", "MXFP4"),
                         [](const testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(Gather, RefusesOutOfRangeIdsWithoutWriting) {
  auto answers = tensor_test::load_known_answers("Q4_K");
  ASSERT_TRUE(answers.has_value());
  const auto& t = answers->tensors[4];  // 8 rows of 2048
  std::vector<float> out(3 * 2048, 5.0f);
  for (int32_t bad : {8, -1, 1 << 30}) {
    std::vector<int32_t> ids = {2, bad, 3};
    auto status = tensor::gather_rows(t.type, t.data, t.row_length, ids, out.data());
    ASSERT_FALSE(status.ok()) << bad;
    EXPECT_NE(status.error().message().find(std::to_string(bad)), std::string::npos)
        << status.error().message();
    EXPECT_NE(status.error().message().find("8 rows"), std::string::npos)
        << status.error().message();
    EXPECT_EQ(out[0], 5.0f);  // nothing written, not even the valid row before the bad one
  }
}

TEST(Gather, RefusesShapeMismatchAndUndecodableTypes) {
  auto answers = tensor_test::load_known_answers("Q4_K");
  ASSERT_TRUE(answers.has_value());
  const auto& t = answers->tensors[4];
  std::vector<int32_t> ids = {0};
  std::vector<float> out(4096);
  // 768 values is three Q4_K blocks, but 8 rows of 2048 are not a whole number of 768-rows.
  EXPECT_FALSE(tensor::gather_rows(t.type, t.data, 768, ids, out.data()).ok());
  EXPECT_FALSE(tensor::gather_rows(t.type, t.data, 100, ids, out.data()).ok());  // partial block
  EXPECT_FALSE(tensor::gather_rows(t.type, t.data, 0, ids, out.data()).ok());
  auto status = tensor::gather_rows(DType::kIQ2_XXS, t.data, 256, ids, out.data());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("IQ2_XXS"), std::string::npos);
  // An empty id list is fine and writes nothing.
  EXPECT_TRUE(tensor::gather_rows(t.type, t.data, t.row_length, {}, out.data()).ok());
}

}  // namespace
