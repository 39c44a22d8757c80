#include "util/units.h"

#include <gtest/gtest.h>

TEST(Units, FormatsBinaryUnits) {
  EXPECT_EQ(util::format_bytes(0), "0 B");
  EXPECT_EQ(util::format_bytes(1023), "1023 B");
  EXPECT_EQ(util::format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(util::format_bytes(1185376), "1.13 MiB");
  EXPECT_EQ(util::format_bytes(3ull << 30), "3.00 GiB");
}

TEST(Units, ParsesSizes) {
  EXPECT_EQ(*util::parse_bytes("4096"), 4096u);
  EXPECT_EQ(*util::parse_bytes("8G"), 8ull << 30);
  EXPECT_EQ(*util::parse_bytes("512MiB"), 512ull << 20);
  EXPECT_EQ(*util::parse_bytes("1.5g"), 3ull << 29);
  EXPECT_FALSE(util::parse_bytes("lots").ok());
  EXPECT_FALSE(util::parse_bytes("3X").ok());
}
