// Opening a GGUF reads its header only: no page of the tensor data section is faulted in.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "testing/testing.h"
#include "util/page_cache.h"

namespace {

// A read-only mapping of a whole file, with read-around switched off so that only pages the
// parser really touches are brought in (the kernel otherwise reads ahead of every fault).
struct Mapping {
  explicit Mapping(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    size = static_cast<size_t>(::lseek(fd, 0, SEEK_END));
    data = static_cast<uint8_t*>(::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0));
    ::close(fd);
    ::madvise(data, size, MADV_RANDOM);
  }
  ~Mapping() { ::munmap(data, size); }
  std::span<const uint8_t> bytes() const { return {data, size}; }
  uint8_t* data = nullptr;
  size_t size = 0;
};

size_t resident(std::span<const uint8_t> range) {
  auto n = util::resident_pages(range);
  EXPECT_TRUE(n.ok()) << n.error().message();
  return n.ok() ? *n : 0;
}

TEST(GgufPageCache, ParsingDoesNotTouchTensorData) {
  // 8 tensors of 256 KiB each behind a header with a few metadata entries.
  gguf::Writer w;
  w.set("general.architecture", gguf::MetaValue::string("llama"));
  w.set("tokenizer.ggml.tokens", gguf::MetaValue::array_strings({"a", "b", "c"}));
  for (int i = 0; i < 8; ++i) {
    w.add_tensor(fmt::format("blk.{}.ffn_up.weight", i), gguf::TensorType::kF32, {256, 256},
                 [](std::span<uint8_t> out) -> util::Status {
                   std::fill(out.begin(), out.end(), 0x3f);
                   return {};
                 });
  }
  const std::string path = (testing_util::temp_dir() / "pages.gguf").string();
  ASSERT_TRUE(w.write(path).ok());
  ASSERT_TRUE(util::drop_from_page_cache(path).ok());

  Mapping map(path);
  if (resident(map.bytes()) != 0) {
    GTEST_SKIP() << "the kernel kept pages of " << path
                 << " cached after POSIX_FADV_DONTNEED (tmpfs?), so residency proves nothing";
  }
  auto file = gguf::File::parse(map.bytes(), path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  ASSERT_EQ(file->tensors().size(), 8u);

  const size_t page = util::page_size();
  const size_t first_data_page = (file->data_offset() + page - 1) / page * page;
  ASSERT_LT(first_data_page, map.size);
  EXPECT_GE(resident(map.bytes().first(file->data_offset())), 1u) << "the header was read";
  EXPECT_EQ(resident(map.bytes().subspan(first_data_page)), 0u)
      << "parsing faulted in pages of the tensor data section";

  // The probe sees a page once it is read, so the zero above is not an accident of the probe.
  const auto& t = file->tensors()[5];
  volatile uint8_t sink = t.data[t.n_bytes / 2];
  (void)sink;
  EXPECT_EQ(resident(t.data), 1u);
}

}  // namespace
