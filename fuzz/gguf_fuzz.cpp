// libFuzzer target for the GGUF parser: any input either parses and round-trips, or fails cleanly.
//
// Properties checked on every input:
//   - a failure is one line, "gguf: fuzz-input: offset N: ..." with N inside the input;
//   - a success is written back with Writer::copy_of, and the written bytes parse to the same
//     file (version, alignment, data offset, every key and value, every tensor and its bytes);
//   - writing the re-parsed file again gives the same bytes (the writer is deterministic).
// Crashes, leaks, hangs and sanitizer reports are found by libFuzzer itself.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gguf/file.h"
#include "gguf/writer.h"

namespace {

constexpr std::string_view kName = "fuzz-input";

[[noreturn]] void violated(const char* what, const std::string& detail) {
  std::fprintf(stderr, "gguf_fuzz: property violated: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_error(const util::Error& error, size_t size) {
  const std::string& m = error.message();
  if (m.find('\n') != std::string::npos || m.find('\r') != std::string::npos) {
    violated("error is not one line", m);
  }
  const std::string prefix = "gguf: " + std::string(kName) + ": offset ";
  if (m.rfind(prefix, 0) != 0) violated("error does not name the input and an offset", m);
  const unsigned long long offset = std::strtoull(m.c_str() + prefix.size(), nullptr, 10);
  if (offset > size) violated("error offset lies past the end of the input", m);
}

// Touches every accessor on a parsed value so value.cpp is fuzzed too; results are discarded.
void exercise(const gguf::Value& v) {
  (void)v.as_u64(), (void)v.as_i64(), (void)v.as_u32(), (void)v.as_f64(), (void)v.as_bool();
  (void)v.as_string();
  if (!v.is_array()) return;
  for (uint64_t i = 0; i < v.array_size() && i < 64; ++i) {
    (void)v.array_i64(i), (void)v.array_f64(i);
    if (v.array_type() == gguf::ValueType::kString) (void)v.array_string(i);
    if (v.array_type() == gguf::ValueType::kArray) exercise(v.array_nested(i));
  }
  (void)v.array_as<int32_t>(), (void)v.array_as<uint8_t>(), (void)v.array_as<float>();
  (void)v.array_as<bool>();
}

void check_same(const gguf::File& a, const gguf::File& b) {
  if (a.version() != b.version()) violated("version changed", "");
  if (a.alignment() != b.alignment()) violated("alignment changed", "");
  if (a.data_offset() != b.data_offset()) violated("data offset changed", "");
  if (a.metadata().size() != b.metadata().size()) violated("metadata count changed", "");
  for (size_t i = 0; i < a.metadata().size(); ++i) {
    const auto& x = a.metadata()[i];
    const auto& y = b.metadata()[i];
    if (x.key != y.key) violated("key changed", std::string(x.key));
    if (x.file_offset != y.file_offset) violated("key moved", std::string(x.key));
    if (!(gguf::MetaValue::from(x.value) == gguf::MetaValue::from(y.value))) {
      violated("value changed", std::string(x.key));
    }
  }
  if (a.tensors().size() != b.tensors().size()) violated("tensor count changed", "");
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const auto& x = a.tensors()[i];
    const auto& y = b.tensors()[i];
    const std::string name(x.name);
    if (x.name != y.name || x.n_dims != y.n_dims || x.ne != y.ne || x.type != y.type ||
        x.offset != y.offset || x.n_elements != y.n_elements || x.n_bytes != y.n_bytes ||
        x.info_offset != y.info_offset) {
      violated("tensor info changed", name);
    }
    if (x.data.size() != x.n_bytes || y.data.size() != y.n_bytes) {
      violated("tensor data span has the wrong size", name);
    }
    if (x.n_bytes > 0 && std::memcmp(x.data.data(), y.data.data(), x.n_bytes) != 0) {
      violated("tensor data changed", name);
    }
    if (b.find_tensor(x.name) != &y) violated("tensor lookup broken", name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gguf::File::parse({data, size}, kName);
  if (!file) {
    check_error(file.error(), size);
    return 0;
  }
  for (const auto& kv : file->metadata()) {
    exercise(kv.value);
    if (file->find(kv.key) != &kv.value) violated("key lookup broken", std::string(kv.key));
  }
  for (const auto& t : file->tensors()) (void)t.row_bytes(), (void)t.n_rows();

  auto written = gguf::Writer::copy_of(*file).write_to_memory();
  if (!written) violated("a parsed file could not be written", written.error().message());
  auto again = gguf::File::parse(*written, "round-trip");
  if (!again) violated("the written file does not parse", again.error().message());
  check_same(*file, *again);
  auto rewritten = gguf::Writer::copy_of(*again).write_to_memory();
  if (!rewritten || *rewritten != *written) violated("writing is not deterministic", "");
  return 0;
}
