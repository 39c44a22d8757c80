// Typed reads of architecture metadata ("<arch>.key") with defaults and per-layer arrays.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/file.h"
#include "util/result.h"

namespace model {

class Metadata {
 public:
  Metadata(const gguf::File& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  const gguf::File& file() const { return file_; }
  std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }

  // "<arch>.suffix" as an integer: the value, `fallback` when absent, an error when malformed.
  util::Result<int64_t> integer(std::string_view suffix, std::optional<int64_t> fallback) const;
  util::Result<float> number(std::string_view suffix, std::optional<float> fallback) const;
  // A key that may be a scalar (broadcast to every layer) or an array of n_layer values.
  util::Result<std::vector<int>> per_layer(std::string_view suffix, int n_layer,
                                           std::optional<int64_t> fallback) const;
  util::Result<std::vector<bool>> per_layer_bool(std::string_view suffix, int n_layer) const;

  util::Error error(std::string_view what) const;

 private:
  const gguf::File& file_;
  std::string arch_;
};

}  // namespace model
