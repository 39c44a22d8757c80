// GGUF reader memory: parsing allocates in proportion to the file, whatever counts it claims.
//
// This file replaces the global operator new/delete of the gguf_tests executable with versions
// that forward to malloc/free and, while a parse is being measured on this thread, add up every
// byte requested. Aligned and other variants keep their defaults (the parser uses none).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "gguf/file.h"
#include "testing/testing.h"

namespace {

thread_local bool counting = false;
thread_local uint64_t allocated = 0;

void* allocate(size_t n) {
  if (counting) allocated += n;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(size_t n) {
  return allocate(n);
}
void* operator new[](size_t n) {
  return allocate(n);
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept {
  return operator new(n, t);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace {

// The stated bound: every byte allocated during one parse (counted cumulatively, so it also
// bounds the peak) is at most kFactor × the file size plus a small constant. The worst cases
// are many tiny metadata entries (a 120-byte KeyValue plus a hash node per 16 file bytes) and
// arrays of empty arrays (a 96-byte Value per 12 file bytes).
constexpr uint64_t kFactor = 16;
constexpr uint64_t kConstant = 64 * 1024;

struct Measured {
  bool ok = false;
  uint64_t bytes = 0;
};

Measured measure_parse(std::span<const uint8_t> data) {
  allocated = 0;
  counting = true;
  Measured m;
  {
    auto file = gguf::File::parse(data, "hostile.gguf");
    m.ok = file.ok();
  }
  counting = false;
  m.bytes = allocated;
  return m;
}

// Little-endian GGUF pieces, enough to write hostile headers by hand.
class Bytes {
 public:
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv) {
    return u32(gguf::kMagic).u32(3).u64(n_tensors).u64(n_kv);
  }
  Bytes& zeros(size_t n) {
    v.resize(v.size() + n, 0);
    return *this;
  }
  Bytes& raw(const void* p, size_t n) {
    v.insert(v.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    return *this;
  }
  std::vector<uint8_t> v;
};

constexpr size_t kSize = 256 * 1024;  // each hostile file is about this big

void expect_proportional(const std::string& what, const std::vector<uint8_t>& data,
                         bool expect_ok) {
  const Measured m = measure_parse(data);
  EXPECT_EQ(m.ok, expect_ok) << what;
  EXPECT_LE(m.bytes, kFactor * data.size() + kConstant)
      << what << ": " << m.bytes << " bytes allocated parsing a " << data.size() << "-byte file";
  std::printf("  %-44s %8zu-byte file: %9llu bytes allocated (%.2f× the file)\n", what.c_str(),
              data.size(), static_cast<unsigned long long>(m.bytes),
              static_cast<double>(m.bytes) / static_cast<double>(data.size()));
}

TEST(GgufParseMemory, CountsAreNotTrustedBeyondTheFile) {
  // Counts as large as the file could hold, followed by bytes that fail at the first entry.
  expect_proportional("metadata count filling the file",
                      Bytes().header(0, (kSize - 24) / 14).zeros(kSize - 24).v, false);
  expect_proportional("tensor count filling the file",
                      Bytes().header((kSize - 24) / 33, 0).zeros(kSize - 24).v, false);
  // Absurd counts: refused before anything is allocated for them.
  expect_proportional("metadata count 2^62", Bytes().header(0, 1ull << 62).zeros(64).v, false);
  expect_proportional("array count 2^60",
                      Bytes().header(0, 1).str("a").u32(9).u32(8).u64(1ull << 60).zeros(64).v,
                      false);
  // Eight levels of nested arrays, each claiming every byte that is left.
  Bytes nested;
  nested.header(0, 1).str("n").u32(9);
  for (int level = 0; level < 8; ++level) {
    nested.u32(9).u64((kSize - 24 - 13 - 12 * (level + 1)) / 12);
  }
  nested.zeros(kSize - nested.v.size());
  expect_proportional("8 nested arrays each claiming the rest", nested.v, false);
}

TEST(GgufParseMemory, DenseValidFilesStayProportional) {
  Bytes kvs;
  const uint64_t n_kv = kSize / 19;
  kvs.header(0, n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    char key[8];
    std::snprintf(key, sizeof key, "%06llu", static_cast<unsigned long long>(i));
    kvs.str(key).u32(0).zeros(1);  // u8 value
  }
  expect_proportional("many tiny metadata entries", kvs.v, true);

  Bytes empty_arrays;
  const uint64_t n_arrays = kSize / 12;
  empty_arrays.header(0, 1).str("a").u32(9).u32(9).u64(n_arrays);
  for (uint64_t i = 0; i < n_arrays; ++i) empty_arrays.u32(0).u64(0);
  expect_proportional("array of empty arrays", empty_arrays.v, true);

  Bytes empty_strings;
  const uint64_t n_strings = kSize / 8;
  empty_strings.header(0, 1).str("s").u32(9).u32(8).u64(n_strings).zeros(8 * n_strings);
  expect_proportional("array of empty strings", empty_strings.v, true);

  Bytes tensors;
  const uint64_t n_tensors = kSize / 38;
  tensors.header(n_tensors, 0);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "%06llu", static_cast<unsigned long long>(i));
    tensors.str(name).u32(1).u64(0).u32(0).u64(0);  // empty F32 tensor at offset 0
  }
  tensors.zeros(32 - tensors.v.size() % 32);
  expect_proportional("many empty tensors", tensors.v, true);
}

TEST(GgufParseMemory, RealAndMalformedFilesStayProportional) {
  std::vector<std::filesystem::path> paths = {
      testing_util::shared_dir() / "models/stories260K.gguf",
      testing_util::shared_dir() / "models/vocab/ggml-vocab-gemma-3-reconstructed.gguf",
      testing_util::shared_dir() / "models/vocab/ggml-vocab-gpt-2.gguf"};
  for (const auto& entry : std::filesystem::directory_iterator(testing_util::source_dir() /
                                                               "tests/data/gguf-malformed")) {
    if (entry.path().extension() == ".gguf") paths.push_back(entry.path());
  }
  for (const auto& path : paths) {
    auto data = testing_util::read_file(path);
    const Measured m = measure_parse(data);
    EXPECT_LE(m.bytes, kFactor * data.size() + kConstant)
        << path << ": " << m.bytes << " bytes allocated parsing " << data.size() << " bytes";
  }
}

}  // namespace
