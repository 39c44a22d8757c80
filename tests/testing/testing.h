// Test helpers: paths to the shared data and the repository, whole-file reads, temp dirs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace testing_util {

// ../shared beside the repository (models, vocabularies, known-answer data).
std::filesystem::path shared_dir();
// The repository root (models/, tests/data/ …).
std::filesystem::path source_dir();
// The build directory (the headroom binary lives at binary_dir()/apps/headroom/headroom).
std::filesystem::path binary_dir();
std::filesystem::path headroom_binary();
// A fresh empty directory under the system temp dir, unique to this test.
std::filesystem::path temp_dir();

std::vector<uint8_t> read_file(const std::filesystem::path& path);
std::vector<float> read_f32(const std::filesystem::path& path);
std::string read_text(const std::filesystem::path& path);

// Runs a shell command; returns its exit status and fills stdout (and stderr if asked).
int run_command(const std::string& command, std::string* out, std::string* err = nullptr);

}  // namespace testing_util
