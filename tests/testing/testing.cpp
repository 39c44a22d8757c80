// Test helpers: shared data paths, file reads, temp dirs, running the CLI.
#include "testing/testing.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace testing_util {

std::filesystem::path shared_dir() { return HEADROOM_SHARED_DIR; }
std::filesystem::path source_dir() { return HEADROOM_SOURCE_DIR; }
std::filesystem::path binary_dir() { return HEADROOM_BINARY_DIR; }
std::filesystem::path headroom_binary() { return binary_dir() / "apps" / "headroom" / "headroom"; }

std::filesystem::path temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  auto dir = std::filesystem::temp_directory_path() /
             ("headroom-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ADD_FAILURE() << "cannot read " << path;
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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

int run_command(const std::string& command, std::string* out, std::string* err) {
  std::string cmd = command;
  std::filesystem::path err_file;
  if (err) {
    err_file = std::filesystem::temp_directory_path() / ("headroom-stderr-" + std::to_string(::getpid()));
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

std::string test_name(std::string value) {
  for (auto& c : value) c = c == '-' ? '_' : c;
  return value;
}

}  // namespace testing_util
