// Block structs against gguf's type table (sizes, values per block) and the dtype helpers.
#include "tensor/blocks.h"

#include <gtest/gtest.h>

#include "gguf/types.h"
#include "tensor/dtype.h"

namespace {

using tensor::DType;

template <class Block>
void expect_layout(DType type) {
  const auto& info = gguf::tensor_type_info(type);
  EXPECT_EQ(sizeof(Block), info.block_bytes) << info.name;
  EXPECT_EQ(static_cast<uint32_t>(Block::kValues), info.block_size) << info.name;
  EXPECT_EQ(static_cast<int64_t>(alignof(Block)), tensor::block_alignment(type)) << info.name;
}

TEST(Blocks, MatchGgufTypeTable) {
  expect_layout<tensor::BlockQ4_0>(DType::kQ4_0);
  expect_layout<tensor::BlockQ4_1>(DType::kQ4_1);
  expect_layout<tensor::BlockQ5_0>(DType::kQ5_0);
  expect_layout<tensor::BlockQ5_1>(DType::kQ5_1);
  expect_layout<tensor::BlockQ8_0>(DType::kQ8_0);
  expect_layout<tensor::BlockQ8_1>(DType::kQ8_1);
  expect_layout<tensor::BlockQ2_K>(DType::kQ2_K);
  expect_layout<tensor::BlockQ3_K>(DType::kQ3_K);
  expect_layout<tensor::BlockQ4_K>(DType::kQ4_K);
  expect_layout<tensor::BlockQ5_K>(DType::kQ5_K);
  expect_layout<tensor::BlockQ6_K>(DType::kQ6_K);
  expect_layout<tensor::BlockQ8_K>(DType::kQ8_K);
  expect_layout<tensor::BlockIQ4_NL>(DType::kIQ4_NL);
  expect_layout<tensor::BlockIQ4_XS>(DType::kIQ4_XS);
  expect_layout<tensor::BlockTQ1_0>(DType::kTQ1_0);
  expect_layout<tensor::BlockTQ2_0>(DType::kTQ2_0);
  expect_layout<tensor::BlockMXFP4>(DType::kMXFP4);
  expect_layout<tensor::BlockNVFP4>(DType::kNVFP4);
}

TEST(Blocks, BitsPerWeightAsDocumented) {
  EXPECT_DOUBLE_EQ(gguf::bits_per_weight(DType::kQ4_K), 4.5);
  EXPECT_DOUBLE_EQ(gguf::bits_per_weight(DType::kQ6_K), 6.5625);
  EXPECT_DOUBLE_EQ(gguf::bits_per_weight(DType::kQ2_K), 2.625);
  EXPECT_DOUBLE_EQ(gguf::bits_per_weight(DType::kIQ4_XS), 4.25);
  EXPECT_DOUBLE_EQ(gguf::bits_per_weight(DType::kTQ1_0), 1.6875);
}

TEST(Dtype, RowBytes) {
  EXPECT_EQ(tensor::row_bytes(DType::kF32, 10), 40);
  EXPECT_EQ(tensor::row_bytes(DType::kBF16, 10), 20);
  EXPECT_EQ(tensor::row_bytes(DType::kQ4_0, 4096), 128 * 18);
  EXPECT_EQ(tensor::row_bytes(DType::kQ4_K, 4096), 16 * 144);
  EXPECT_EQ(tensor::row_bytes(DType::kNVFP4, 128), 2 * 36);
  EXPECT_EQ(tensor::row_bytes(DType::kQ6_K, 0), 0);
  EXPECT_EQ(tensor::block_values(DType::kIQ4_XS), 256);
}

TEST(Dtype, CheckRowLength) {
  EXPECT_TRUE(tensor::check_row_length(DType::kQ4_K, 512).ok());
  EXPECT_TRUE(tensor::check_row_length(DType::kF16, 7).ok());
  auto bad = tensor::check_row_length(DType::kQ8_0, 40);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("Q8_0"), std::string::npos) << bad.error().message();
  EXPECT_NE(bad.error().message().find("40"), std::string::npos) << bad.error().message();
  EXPECT_FALSE(tensor::check_row_length(DType::kF32, -1).ok());
}

TEST(Dtype, Capabilities) {
  EXPECT_TRUE(tensor::can_dequantize(DType::kQ3_K));
  EXPECT_TRUE(tensor::can_quantize(DType::kQ3_K));
  EXPECT_TRUE(tensor::can_quantize(DType::kQ8_K));
  EXPECT_FALSE(tensor::can_dequantize(DType::kIQ2_S));
  EXPECT_FALSE(tensor::can_quantize(DType::kIQ2_S));
  // Everything that can be written can be read back, and the other way round.
  for (uint32_t raw = 0; raw < 64; ++raw) {
    auto info = gguf::tensor_type_info(raw);
    if (info) {
      EXPECT_EQ(tensor::can_quantize(info->type), tensor::can_dequantize(info->type)) << info->name;
    }
  }
}

}  // namespace
