// GGUF writer: reading then writing every shared file reproduces it byte for byte.
#include <gtest/gtest.h>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "testing/testing.h"

namespace {

std::vector<std::filesystem::path> all_shared_ggufs() {
  std::vector<std::filesystem::path> out;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(testing_util::shared_dir())) {
    if (entry.is_regular_file() && entry.path().extension() == ".gguf") out.push_back(entry.path());
  }
  return out;
}

TEST(GgufWriter, RoundTripsEverySharedFileByteForByte) {
  auto files = all_shared_ggufs();
  ASSERT_GE(files.size(), 41u);
  for (const auto& path : files) {
    auto original = testing_util::read_file(path);
    auto file = gguf::File::parse(original, path.string());
    ASSERT_TRUE(file.ok()) << file.error().message();
    auto written = gguf::Writer::copy_of(*file).write_to_memory();
    ASSERT_TRUE(written.ok()) << written.error().message();
    ASSERT_EQ(written->size(), original.size()) << path;
    EXPECT_TRUE(*written == original) << path << " differs after a read/write round trip";
  }
}

TEST(GgufWriter, WritesFileThatReadsBack) {
  gguf::Writer w;
  w.set("general.architecture", gguf::MetaValue::string("llama"));
  w.set("test.count", gguf::MetaValue::u32(7));
  std::vector<int32_t> ints = {-1, 2, 3};
  w.set("test.ints", gguf::MetaValue::array_i32(ints));
  w.set("test.names", gguf::MetaValue::array_strings({"a", "bc", ""}));
  std::vector<float> data(64);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f;
  w.add_tensor(
      "t.weight", gguf::TensorType::kF32, {16, 4},
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size() * 4));
  w.add_tensor("u.weight", gguf::TensorType::kF32, {3}, [](std::span<uint8_t> out) -> util::Status {
    std::fill(out.begin(), out.end(), 0);
    return {};
  });
  auto path = testing_util::temp_dir() / "w.gguf";
  ASSERT_TRUE(w.write(path.string()).ok());
  auto file = gguf::File::open(path.string());
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(*file->find("test.count")->as_u64(), 7u);
  EXPECT_EQ((*file->find("test.ints")->array_as<int32_t>())[0], -1);
  EXPECT_EQ(file->find("test.names")->array_string(1), "bc");
  const auto* t = file->find_tensor("t.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->offset % 32, 0u);
  EXPECT_EQ(std::memcmp(t->data.data(), data.data(), t->n_bytes), 0);
  EXPECT_EQ(file->find_tensor("u.weight")->offset, 256u);
}

// A tensor fill that fails leaves no file behind — neither the output nor the temporary one —
// and an existing file under the output name keeps its bytes; tensors a fill leaves alone read
// as zeros (the sparse file's holes).
TEST(GgufWriter, FailedWriteLeavesNothingBehind) {
  const auto dir = testing_util::temp_dir();
  const auto path = dir / "model.gguf";
  gguf::Writer ok;
  ok.set("general.architecture", gguf::MetaValue::string("llama"));
  ok.add_tensor("hole.weight", gguf::TensorType::kF32, {8},
                [](std::span<uint8_t>) -> util::Status { return {}; });
  ASSERT_TRUE(ok.write(path.string()).ok());
  auto file = gguf::File::open(path.string());
  ASSERT_TRUE(file.ok());
  for (uint8_t b : file->find_tensor("hole.weight")->data) EXPECT_EQ(b, 0);
  const auto before = testing_util::read_file(path);

  gguf::Writer bad;
  bad.set("general.architecture", gguf::MetaValue::string("llama"));
  bad.add_tensor("a.weight", gguf::TensorType::kF32, {4},
                 [](std::span<uint8_t> out) -> util::Status {
                   std::fill(out.begin(), out.end(), 1);
                   return {};
                 });
  bad.add_tensor("b.weight", gguf::TensorType::kF32, {4}, [](std::span<uint8_t>) -> util::Status {
    return util::errorf("source went away");
  });
  auto s = bad.write(path.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("b.weight"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("source went away"), std::string::npos);
  EXPECT_TRUE(testing_util::read_file(path) == before);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
}

}  // namespace
