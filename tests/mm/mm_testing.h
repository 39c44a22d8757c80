// What the mm tests share: running the Python reference (tests/reference), reading its stage
// dumps, and comparing arrays with a stated tolerance.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "tensor/dequantize.h"
#include "testing/testing.h"

namespace mm_testing {

namespace fs = std::filesystem;

using testing_util::python3;
using testing_util::reference_script;

inline fs::path data(const std::string& name) {
  return testing_util::source_dir() / "tests/data/mm" / name;
}

// Runs a Python reference script; fails the test (and returns false) when it fails.
inline bool run_python(const std::string& script, const std::string& args) {
  const std::string command = python3() + " " + reference_script(script).string() + " " + args;
  std::string out, err;
  if (testing_util::run_command(command, &out, &err) != 0) {
    ADD_FAILURE() << command << "\n"
                  << out << err << "(the reference needs Debian's python3-numpy and "
                  << "python3-pil: scripts/setup.sh)";
    return false;
  }
  return true;
}

// The output of `script args -o OUT`, made once: ctest runs every test in a process of its own,
// so outputs are kept in the build tree under a hash of the reference scripts, the arguments and
// every file they name, and shared by the processes (written aside, then renamed into place).
inline fs::path cached_python(const std::string& script, const std::string& args) {
  std::string key = args;
  for (const auto& entry : fs::directory_iterator(testing_util::source_dir() / "tests/reference")) {
    if (entry.path().extension() == ".py") key += testing_util::read_text(entry.path());
  }
  size_t start = 0;
  while (start < args.size()) {  // the contents of the files the arguments name
    size_t end = args.find(' ', start);
    if (end == std::string::npos) end = args.size();
    const fs::path word = args.substr(start, end - start);
    std::error_code ec;
    if (fs::is_regular_file(word, ec)) key += testing_util::read_text(word);
    start = end + 1;
  }
  const fs::path dir = testing_util::binary_dir() / "tests/mm/reference-cache";
  fs::create_directories(dir);
  const fs::path out = dir / fmt::format("{:016x}.gguf", std::hash<std::string>{}(script + key));
  if (fs::exists(out)) return out;
  // Written beside its final name under a name of this process's own, then renamed: a test in
  // another process never sees half a file.
  const fs::path own_dir = testing_util::temp_dir();
  const fs::path partial = dir / (out.filename().string() + "." + own_dir.filename().string());
  if (!run_python(script, args + " -o " + partial.string())) return out;
  fs::rename(partial, out);
  return out;
}

// A tiny random-weight Gemma 4 projector written by tests/reference/synth_mmproj.py (vision and
// audio, clip bounds on the clippable linears).
inline fs::path tiny_projector(const std::string& options = "--clamp") {
  return cached_python("synth_mmproj.py", "--shape tiny " + options);
}

// The named arrays of a reference dump (a GGUF of f32 tensors, f16 for 8-bit pixel values).
struct Dump {
  std::map<std::string, std::vector<float>> arrays;
  const std::vector<float>& operator[](const std::string& name) const {
    static const std::vector<float> kEmpty;
    auto it = arrays.find(name);
    if (it == arrays.end()) {
      ADD_FAILURE() << "the reference dump has no '" << name << "'";
      return kEmpty;
    }
    return it->second;
  }
};

inline Dump read_dump(const fs::path& path) {
  Dump d;
  auto file = gguf::File::open(path.string());
  if (!file) {
    ADD_FAILURE() << file.error().message();
    return d;
  }
  for (const auto& t : file->tensors()) {
    std::vector<float> v(t.n_elements);
    EXPECT_TRUE(
        tensor::dequantize_row(t.type, t.data.data(), v.data(), static_cast<int64_t>(t.n_elements))
            .ok());
    d.arrays[std::string(t.name)] = std::move(v);
  }
  return d;
}

struct Difference {
  double max_diff = 0;  // max |a − b|
  double max_abs = 0;   // max |expected|
  size_t at = 0;        // index of the largest difference
  double relative() const { return max_abs > 0 ? max_diff / max_abs : max_diff; }
};

inline Difference compare(std::span<const float> expected, std::span<const float> actual) {
  Difference d;
  EXPECT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < std::min(expected.size(), actual.size()); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(double(expected[i])));
    const double diff = std::fabs(double(expected[i]) - double(actual[i]));
    if (diff > d.max_diff || std::isnan(diff)) {
      d.max_diff = std::isnan(diff) ? INFINITY : diff;
      d.at = i;
    }
  }
  return d;
}

// Checks one stage: max |Δ| ≤ tolerance · max |expected|, printing the measured figure.
inline void expect_close(const std::string& what, std::span<const float> expected,
                         std::span<const float> actual, double tolerance) {
  const Difference d = compare(expected, actual);
  std::printf("[ stage ] %-34s max|d| %.3g  max|ref| %.3g  rel %.2g (tolerance %.2g)\n",
              what.c_str(), d.max_diff, d.max_abs, d.relative(), tolerance);
  EXPECT_LE(d.relative(), tolerance)
      << what << ": largest difference " << d.max_diff << " at " << d.at << " of " << d.max_abs;
}

}  // namespace mm_testing
