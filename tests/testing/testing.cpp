// Test helpers: shared data paths, file reads, temp dirs, running the CLI.
#include "testing/testing.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

namespace testing_util {

std::filesystem::path shared_dir() {
  return HEADROOM_SHARED_DIR;
}
std::filesystem::path source_dir() {
  return HEADROOM_SOURCE_DIR;
}
std::filesystem::path binary_dir() {
  return HEADROOM_BINARY_DIR;
}
std::filesystem::path headroom_binary() {
  return binary_dir() / "apps" / "headroom" / "headroom";
}
std::string headroom() {
  return headroom_binary().string();
}
std::string stories_model() {
  return (shared_dir() / "models/stories260K.gguf").string();
}

namespace {

// The directories made for tests, removed when their test passes so that a test run leaves the
// disk as it found it (a full run wrote 1.5 GB); a failing test's stay for a look. Directories
// made outside a test (a suite's shared data) go when the whole program passes.
class ScratchDirs : public ::testing::EmptyTestEventListener {
 public:
  static ScratchDirs& instance() {
    static ScratchDirs* dirs = [] {
      auto* d = new ScratchDirs;  // owned by gtest's listener list from here on
      ::testing::UnitTest::GetInstance()->listeners().Append(d);
      return d;
    }();
    return *dirs;
  }
  void add(const std::filesystem::path& dir, bool in_a_test) {
    std::lock_guard lock(mu_);
    (in_a_test ? test_ : program_).insert(dir);
  }

 private:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    std::lock_guard lock(mu_);
    if (!info.result()->Failed()) remove(test_);
    test_.clear();
  }
  void OnTestProgramEnd(const ::testing::UnitTest& unit) override {
    std::lock_guard lock(mu_);
    if (unit.Passed()) remove(program_);
  }
  static void remove(const std::set<std::filesystem::path>& dirs) {
    std::error_code ec;
    for (const auto& dir : dirs) std::filesystem::remove_all(dir, ec);
  }

  std::mutex mu_;
  std::set<std::filesystem::path> test_, program_;
};

// The system temp dir / "headroom-<pid>-<tag>-<suite>.<test>" ("…-test" outside a test or for the
// program), made if missing; one directory even for a parameterized test (its '/' become '_').
std::filesystem::path own_dir(const std::string& tag, bool for_the_program = false) {
  const auto* info =
      for_the_program ? nullptr : ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = "headroom-" + std::to_string(::getpid()) + (tag.empty() ? "" : "-" + tag) +
                     "-" +
                     (info ? std::string(info->test_suite_name()) + "." + info->name() : "test");
  std::replace(name.begin(), name.end(), '/', '_');
  auto dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::create_directories(dir);
  ScratchDirs::instance().add(dir, info != nullptr);
  return dir;
}

}  // namespace

std::filesystem::path temp_dir() {
  auto dir = own_dir("");
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    std::filesystem::remove_all(entry.path());
  return dir;
}

std::filesystem::path test_dir(const std::string& tag) {
  return own_dir(tag);
}

std::filesystem::path program_dir() {
  return own_dir("", true);
}

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ADD_FAILURE() << "cannot read " << path;
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

std::vector<float> read_f32(const std::filesystem::path& path) {
  auto bytes = read_file(path);
  std::vector<float> out(bytes.size() / 4);
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ADD_FAILURE() << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<Mapping> mappings_of(const std::string& file) {
  const std::string path = std::filesystem::weakly_canonical(file).string();  // as smaps names it
  std::ifstream smaps("/proc/self/smaps");
  std::vector<Mapping> out;
  std::string line;
  bool ours = false;
  while (std::getline(smaps, line)) {
    if (line.rfind("VmFlags:", 0) == 0) {
      if (ours) out.back().huge_page_hint = line.find(" hg") != std::string::npos;
      continue;
    }
    // A mapping's header line: "begin-end perms offset dev inode path"; the rest are "Key: value".
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    if (dash == std::string::npos || space == std::string::npos || dash > space) continue;
    ours = line.size() >= path.size() &&
           line.compare(line.size() - path.size(), path.size(), path) == 0;
    if (ours) {
      out.push_back({std::stoull(line.substr(0, dash), nullptr, 16),
                     std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16), false});
    }
  }
  return out;
}

bool has_transparent_huge_pages() {
  return std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled");
}

int run_command(const std::string& command, std::string* out, std::string* err) {
  std::string cmd = command;
  std::filesystem::path err_file;
  if (err) {
    err_file =
        std::filesystem::temp_directory_path() / ("headroom-stderr-" + std::to_string(::getpid()));
    cmd += " 2>" + err_file.string();
  }
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  size_t n;
  std::string captured;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) captured.append(buf, n);
  int status = ::pclose(pipe);
  if (out) *out = std::move(captured);
  if (err) {
    *err = read_text(err_file);
    std::filesystem::remove(err_file);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const std::string& python3() {
  static const std::string path = [] {
    const char* chosen = std::getenv("HEADROOM_TEST_PYTHON");
    return std::string(chosen != nullptr && *chosen != '\0' ? chosen : "/usr/bin/python3");
  }();
  return path;
}

std::filesystem::path reference_script(const std::string& name) {
  return source_dir() / "tests/reference" / name;
}

void write_assistant(const std::filesystem::path& target, const std::filesystem::path& drafter,
                     const std::string& options) {
  const std::string command = python3() + " " + reference_script("write_assistant.py").string() +
                              " " + target.string() + " -o " + drafter.string() + " " + options;
  std::string out, err;
  EXPECT_EQ(run_command(command, &out, &err), 0) << command << "\n" << out << err;
}

Ran run_headroom(const std::string& args) {
  Ran r;
  r.rc = run_command(headroom() + " " + args, &r.out, &r.err);
  return r;
}

ScopedEnv::ScopedEnv(std::string name, const std::optional<std::string>& value)
    : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) previous_ = old;
  if (value)
    ::setenv(name_.c_str(), value->c_str(), 1);
  else
    ::unsetenv(name_.c_str());
}

ScopedEnv::~ScopedEnv() {
  if (previous_)
    ::setenv(name_.c_str(), previous_->c_str(), 1);
  else
    ::unsetenv(name_.c_str());
}

std::vector<int32_t> spread_token_ids(int n) {
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = (37 * i + 11) % 500 + 3;
  return ids;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float sd, float mean) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, sd);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::string test_name(std::string value) {
  for (auto& c : value) c = c == '-' ? '_' : c;
  return value;
}

}  // namespace testing_util
