// The real vocabularies the constraint tests mask over, loaded from their GGUF files.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/file.h"
#include "tokenizer/tokenizer.h"

namespace sample_tests {

inline tokenizer::Tokenizer load_tokenizer(const std::filesystem::path& path) {
  auto file = gguf::File::open(path.string());
  EXPECT_TRUE(file.ok()) << path;
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tok.ok());
  return std::move(*tok);
}

}  // namespace sample_tests
