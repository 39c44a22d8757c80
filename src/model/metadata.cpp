// Typed reads of architecture metadata, accepting the variations real converters write.
#include "model/metadata.h"

#include <limits>

namespace model {

util::Error Metadata::error(std::string_view what) const {
  return util::errorf("model: {}: {}", file_.name(), what);
}

util::Result<int64_t> Metadata::integer(std::string_view suffix,
                                        std::optional<int64_t> fallback) const {
  const std::string k = key(suffix);
  const gguf::Value* v = file_.find(k);
  if (!v) {
    if (fallback) return *fallback;
    return error(
        fmt::format("required key '{}' is missing — the file is incomplete or not a {} "
                    "model; re-convert it",
                    k, arch_));
  }
  auto i = v->as_i64();
  if (!i || *i < 0 || *i > std::numeric_limits<int32_t>::max()) {
    return error(
        fmt::format("key '{}' must be a non-negative integer (got {}) — re-convert the model", k,
                    gguf::value_type_name(v->type())));
  }
  return *i;
}

util::Result<float> Metadata::number(std::string_view suffix, std::optional<float> fallback) const {
  const std::string k = key(suffix);
  const gguf::Value* v = file_.find(k);
  if (!v) {
    if (fallback) return *fallback;
    return error(fmt::format("required key '{}' is missing — re-convert the model", k));
  }
  auto f = v->as_f64();
  if (!f)
    return error(
        fmt::format("key '{}' must be a number (got {})", k, gguf::value_type_name(v->type())));
  return static_cast<float>(*f);
}

util::Result<std::vector<int>> Metadata::per_layer(std::string_view suffix, int n_layer,
                                                   std::optional<int64_t> fallback) const {
  const std::string k = key(suffix);
  const gguf::Value* v = file_.find(k);
  if (v && v->is_array()) {
    // Signed and unsigned element types both occur in real files (spec §9).
    auto values = v->array_as<int32_t>();
    if (!values) return error(fmt::format("key '{}' must be an integer array", k));
    if (static_cast<int>(values->size()) != n_layer) {
      return error(
          fmt::format("key '{}' has {} entries but the model has {} layers — re-convert the "
                      "model",
                      k, values->size(), n_layer));
    }
    for (int x : *values) {
      if (x < 0) return error(fmt::format("key '{}' holds a negative value {}", k, x));
    }
    return std::vector<int>(values->begin(), values->end());
  }
  HR_ASSIGN_OR_RETURN(int64_t scalar, integer(suffix, fallback));
  return std::vector<int>(n_layer, static_cast<int>(scalar));
}

util::Result<std::vector<bool>> Metadata::per_layer_bool(std::string_view suffix,
                                                         int n_layer) const {
  const std::string k = key(suffix);
  const gguf::Value* v = file_.find(k);
  if (!v) return std::vector<bool>(n_layer, false);
  if (auto b = v->as_bool()) return std::vector<bool>(n_layer, *b);
  auto values = v->array_as<bool>();
  if (!values) return error(fmt::format("key '{}' must be a bool array", k));
  if (static_cast<int>(values->size()) != n_layer) {
    return error(fmt::format("key '{}' has {} entries but the model has {} layers", k,
                             values->size(), n_layer));
  }
  return *values;
}

}  // namespace model
