// Test helpers: paths to the shared data and the repository, whole-file reads, temp dirs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace testing_util {

inline constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;

// ../shared beside the repository (models, vocabularies, known-answer data).
std::filesystem::path shared_dir();
// The repository root (models/, tests/data/ …).
std::filesystem::path source_dir();
// The build directory (the headroom binary lives at binary_dir()/apps/headroom/headroom).
std::filesystem::path binary_dir();
std::filesystem::path headroom_binary();
// headroom_binary() as a string, to start a command line with.
std::string headroom();
// The shipped stories260K model (shared/models), the real model most tests load.
std::string stories_model();
// A fresh empty directory under the system temp dir, unique to this test (emptied on every call;
// removed when the test passes).
std::filesystem::path temp_dir();
// Another directory of this test's own, named by tag, whose files later calls keep (removed when
// the test passes).
std::filesystem::path test_dir(const std::string& tag);
// A directory for files the test program writes once and its tests share (removed when every
// test passed).
std::filesystem::path program_dir();

std::vector<uint8_t> read_file(const std::filesystem::path& path);
std::vector<float> read_f32(const std::filesystem::path& path);
std::string read_text(const std::filesystem::path& path);

// n token ids spread over the first 503 of a vocabulary (every synth model has more), the same
// for every test that compares two ways of evaluating one model.
std::vector<int32_t> spread_token_ids(int n);
// n values drawn from N(mean, sd²) by std::mt19937 seeded with `seed`: the same for every caller.
std::vector<float> random_floats(size_t n, uint32_t seed, float sd = 1.0f, float mean = 0.0f);
// Whether two float vectors hold the same bits (the same length and memcmp-equal).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);
// A parameter value as a gtest name: "tiny-e" → "tiny_e".
std::string test_name(std::string value);

// One mapping (VMA) of a file in this process, from /proc/self/smaps; `huge_page_hint` is
// MADV_HUGEPAGE's mark ("hg" in its VmFlags).
struct Mapping {
  uintptr_t begin = 0, end = 0;
  bool huge_page_hint = false;
};
// The mappings of the file at `path` in this process, in address order.
std::vector<Mapping> mappings_of(const std::string& path);
// Whether this kernel has transparent huge pages (else MADV_HUGEPAGE marks nothing).
bool has_transparent_huge_pages();

// Runs a shell command; returns its exit status and fills stdout (and stderr if asked).
int run_command(const std::string& command, std::string* out, std::string* err = nullptr);

// The interpreter that runs the reference scripts: $HEADROOM_TEST_PYTHON where set (a GPU
// machine's own Python with numpy, scripts/cuda-check.sh), else Debian's, with the packages they
// import (python3-numpy, -pil, -jinja2: scripts/setup.sh); a pyenv python3 earlier on PATH may
// lack them.
const std::string& python3();
// tests/reference/NAME: the independent references and the test-file writers, in Python.
std::filesystem::path reference_script(const std::string& name);
// A random Gemma 4 assistant drafter for the model at `target`, written to `drafter` by
// tests/reference/write_assistant.py with that script's `options`; fails the test where it fails.
void write_assistant(const std::filesystem::path& target, const std::filesystem::path& drafter,
                     const std::string& options = "--n-embd 64");

// How a command ended and what it printed.
struct Ran {
  int rc = -1;
  std::string out, err;
};
// Runs `headroom ARGS`, ARGS being the rest of a shell command line.
Ran run_headroom(const std::string& args);

// Sets (or, with nullopt, unsets) an environment variable for a scope and restores it after, so
// one test's HEADROOM_NVML_LIB does not leak into the next when gtest runs them in one process.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> previous_;
};

}  // namespace testing_util
