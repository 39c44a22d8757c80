// util::MappedFile's huge-page hint, read back from the kernel's own record of the mapping
// (/proc/self/smaps: a VMA's VmFlags carry "hg" once MADV_HUGEPAGE applies to it).
#include "util/mapped_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace {

constexpr uintptr_t kMiB = uintptr_t{1} << 20;

using testing_util::Mapping;
using testing_util::mappings_of;

TEST(MappedFile, HugePageHintCoversTheRangeWidenedToWhole2MiBPagesOfTheMapping) {
  if (!testing_util::has_transparent_huge_pages())
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  const auto path = (testing_util::temp_dir() / "nine-mib.bin").string();
  const size_t size = 9 * kMiB + 100;
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(size, 'w');
  }
  auto file = util::MappedFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  const auto base = reinterpret_cast<uintptr_t>(file->bytes().data());
  const uintptr_t mapped_end = base + (size + 4095) / 4096 * 4096;
  ASSERT_EQ(mappings_of(path).size(), 1u);
  EXPECT_FALSE(mappings_of(path)[0].huge_page_hint);

  const size_t offset = 3 * kMiB + 4096 + 7, length = kMiB;
  file->advise_huge_pages(offset, length);
  const std::vector<Mapping> mappings = mappings_of(path);
  // The VMAs still tile the mapping; exactly one of them is hinted.
  ASSERT_FALSE(mappings.empty());
  EXPECT_EQ(mappings.front().begin, base);
  EXPECT_EQ(mappings.back().end, mapped_end);
  std::vector<Mapping> huge;
  for (size_t i = 0; i < mappings.size(); ++i) {
    if (i > 0) {
      EXPECT_EQ(mappings[i].begin, mappings[i - 1].end);
    }
    if (mappings[i].huge_page_hint) huge.push_back(mappings[i]);
  }
  ASSERT_EQ(huge.size(), 1u);
  const Mapping h = huge[0];
  // It holds the range, ends on 2 MiB boundaries of the address space (or the mapping's ends),
  // and reaches less than 2 MiB past the range either side.
  EXPECT_LE(h.begin, base + offset);
  EXPECT_GE(h.end, base + offset + length);
  EXPECT_TRUE(h.begin % (2 * kMiB) == 0 || h.begin == base) << std::hex << h.begin;
  EXPECT_TRUE(h.end % (2 * kMiB) == 0 || h.end == mapped_end) << std::hex << h.end;
  EXPECT_GT(h.begin + 2 * kMiB, base + offset);
  EXPECT_LT(h.end, base + offset + length + 2 * kMiB);
  EXPECT_LT(h.end - h.begin, mapped_end - base) << "the whole mapping was hinted";

  // A range past the end hints nothing more; one running past it stops at the mapping's end.
  file->advise_huge_pages(size + 1, kMiB);
  EXPECT_EQ(mappings_of(path).size(), mappings.size());
  file->advise_huge_pages(8 * kMiB, 100 * kMiB);
  const std::vector<Mapping> after = mappings_of(path);
  ASSERT_FALSE(after.empty());
  EXPECT_TRUE(after.back().huge_page_hint);
  EXPECT_EQ(after.back().end, mapped_end);
}

}  // namespace
