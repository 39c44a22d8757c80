// Loads the known-answer data of ../shared/testdata/quant/: a GGUF file of 5 tensors per type, the
// values an independent decoder produced from it, and the f32 source they were quantized from.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "tensor/dtype.h"
#include "testing/testing.h"

namespace tensor_test {

struct KnownAnswerTensor {
  std::string name;
  tensor::DType type;
  int64_t row_length = 0;         // ne[0]
  int64_t n_rows = 0;             // ne[1] (the files hold 2-D tensors)
  std::span<const uint8_t> data;  // the quantized bytes inside the GGUF mapping
  int64_t first_value = 0;        // where this tensor starts in the .f32 files
};

struct KnownAnswers {
  std::string type_name;
  gguf::File file;
  std::vector<KnownAnswerTensor> tensors;
  std::vector<float> expected;  // decoded by the independent implementation, all tensors
  std::vector<float> source;    // the f32 values before quantization, all tensors
};

inline std::filesystem::path known_answer_dir() {
  return testing_util::shared_dir() / "testdata" / "quant";
}

// Opens <type_name>.gguf and its .f32 companions; fails the calling test (returns nullopt) when
// anything is missing or inconsistent.
inline std::optional<KnownAnswers> load_known_answers(const std::string& type_name) {
  const auto dir = known_answer_dir();
  auto file = gguf::File::open((dir / (type_name + ".gguf")).string());
  if (!file.ok()) {
    ADD_FAILURE() << file.error().message();
    return std::nullopt;
  }
  KnownAnswers answers{type_name, std::move(file).value(), {}, {}, {}};
  answers.expected = testing_util::read_f32(dir / (type_name + ".expected.f32"));
  answers.source = testing_util::read_f32(dir / (type_name + ".source.f32"));
  int64_t offset = 0;
  for (const gguf::TensorInfo& info : answers.file.tensors()) {
    answers.tensors.push_back({std::string(info.name), info.type, static_cast<int64_t>(info.ne[0]),
                               static_cast<int64_t>(info.n_rows()), info.data, offset});
    offset += static_cast<int64_t>(info.n_elements);
  }
  if (answers.tensors.size() != 5 || offset != static_cast<int64_t>(answers.expected.size()) ||
      answers.expected.size() != answers.source.size()) {
    ADD_FAILURE() << type_name << ": expected 5 tensors covering " << answers.expected.size()
                  << " values, found " << answers.tensors.size() << " covering " << offset;
    return std::nullopt;
  }
  return answers;
}

inline uint32_t float_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

}  // namespace tensor_test
