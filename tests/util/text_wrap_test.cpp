#include "util/text_wrap.h"

#include <gtest/gtest.h>

namespace {

TEST(Wrap, BreaksAtSpacesWithinTheWidthAndIndentsTheRest) {
  EXPECT_EQ(util::wrap("the quick brown fox jumps over the lazy dog", 16, "- ", "  "),
            "- the quick\n"
            "  brown fox\n"
            "  jumps over the\n"
            "  lazy dog\n");
}

TEST(Wrap, CountsCodePointsNotBytes) {
  // "→" and "÷" are 3 and 2 bytes but one column each: 10 columns fit a width of 10.
  EXPECT_EQ(util::wrap("a → b ÷ cd e", 10), "a → b ÷ cd\ne\n");
}

TEST(Wrap, AWordLongerThanALineStandsAlone) {
  EXPECT_EQ(util::wrap("see /a/very/long/path/name here", 8),
            "see\n/a/very/long/path/name\nhere\n");
  EXPECT_EQ(util::wrap("", 8, "> "), "> \n");
}

}  // namespace
