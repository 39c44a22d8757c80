// Importance matrix files: the GGUF form (imatrix.* keys, NAME.in_sum2 / NAME.counts tensors)
// and the legacy binary form llama.cpp still reads.
#include "convert/imatrix.h"

#include <cmath>
#include <cstring>
#include <map>

#include "gguf/file.h"
#include "util/mapped_file.h"

namespace convert {
namespace {

util::Status check_values(const std::string& path, const std::string& name,
                          const std::vector<float>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]) || values[i] < 0) {
      return util::errorf(
          "imatrix {}: entry {} holds {} at column {} — importances are mean "
          "squares (finite, non-negative); regenerate the file",
          path, name, values[i], i);
    }
  }
  return {};
}

std::vector<float> read_f32(const gguf::TensorInfo& t) {
  std::vector<float> out(t.n_elements);
  std::memcpy(out.data(), t.data.data(), out.size() * sizeof(float));
  return out;
}

util::Result<ImportanceMatrix> load_gguf(const std::string& path, const gguf::File& file) {
  ImportanceMatrix m;
  if (const gguf::Value* v = file.find("imatrix.datasets");
      v && v->is_array() && v->array_type() == gguf::ValueType::kString && v->array_size() > 0) {
    m.dataset = std::string(v->array_string(0));
  }
  HR_ASSIGN_OR_RETURN(auto chunks, file.get_u64("imatrix.chunk_count"));
  m.chunk_count = static_cast<int64_t>(chunks.value_or(0));
  // Pair NAME.in_sum2 with NAME.counts.
  std::map<std::string, std::pair<const gguf::TensorInfo*, const gguf::TensorInfo*>> pairs;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const std::string name(t.name);
    if (name.ends_with(".in_sum2")) {
      pairs[name.substr(0, name.size() - 8)].first = &t;
    } else if (name.ends_with(".counts")) {
      pairs[name.substr(0, name.size() - 7)].second = &t;
    }
  }
  if (pairs.empty()) {
    return util::errorf(
        "imatrix {}: no NAME.in_sum2 / NAME.counts tensors — not an importance "
        "matrix file",
        path);
  }
  for (const auto& [name, pair] : pairs) {
    const auto [sums, counts] = pair;
    if (!sums || !counts) {
      return util::errorf("imatrix {}: entry {} has {} but not {} — the file is incomplete", path,
                          name, sums ? "in_sum2" : "counts", sums ? "counts" : "in_sum2");
    }
    if (sums->type != gguf::TensorType::kF32 || counts->type != gguf::TensorType::kF32) {
      return util::errorf("imatrix {}: entry {} must be F32 (in_sum2 {}, counts {})", path, name,
                          gguf::tensor_type_name(sums->type), gguf::tensor_type_name(counts->type));
    }
    const uint64_t n_expert = counts->n_elements;
    if (n_expert == 0 || sums->n_elements % n_expert != 0) {
      return util::errorf(
          "imatrix {}: entry {} has {} sums for {} counts — the sums must be a "
          "whole row per count",
          path, name, sums->n_elements, n_expert);
    }
    std::vector<float> values = read_f32(*sums);
    const std::vector<float> n = read_f32(*counts);
    const size_t row = values.size() / n_expert;
    for (size_t e = 0; e < n_expert; ++e) {
      const float count = std::round(n[e]);
      for (size_t i = 0; i < row; ++i) {
        float& v = values[e * row + i];
        v = count > 0 ? v / count : 1.0f;
      }
    }
    HR_TRY(check_values(path, name, values));
    m.columns.emplace(name, std::move(values));
  }
  return m;
}

// The legacy format: i32 entry count; per entry i32 name length, name, i32 calls, i32 values,
// f32 values (already averaged per call, times the calls); then optionally i32 chunks and the
// dataset name.
util::Result<ImportanceMatrix> load_legacy(const std::string& path,
                                           std::span<const uint8_t> bytes) {
  size_t at = 0;
  auto truncated = [&](std::string_view what) {
    return util::errorf(
        "imatrix {}: truncated at byte {} while reading {} — not an imatrix file, "
        "or cut short",
        path, at, what);
  };
  auto read_i32 = [&](int32_t* v) {
    if (bytes.size() - at < 4) return false;
    std::memcpy(v, bytes.data() + at, 4);
    at += 4;
    return true;
  };
  ImportanceMatrix m;
  int32_t n_entries;
  if (!read_i32(&n_entries)) return truncated("the entry count");
  if (n_entries < 1)
    return util::errorf("imatrix {}: {} entries — not an imatrix file", path, n_entries);
  for (int32_t i = 0; i < n_entries; ++i) {
    int32_t len, calls, n_values;
    if (!read_i32(&len) || len < 1 || static_cast<size_t>(len) > bytes.size() - at) {
      return truncated("an entry name");
    }
    std::string name(reinterpret_cast<const char*>(bytes.data() + at), static_cast<size_t>(len));
    at += static_cast<size_t>(len);
    if (!read_i32(&calls) || !read_i32(&n_values) || n_values < 1 ||
        static_cast<size_t>(n_values) > (bytes.size() - at) / 4) {
      return truncated("entry " + name);
    }
    std::vector<float> values(static_cast<size_t>(n_values));
    std::memcpy(values.data(), bytes.data() + at, values.size() * 4);
    at += values.size() * 4;
    if (calls > 0) {
      for (float& v : values) v /= static_cast<float>(calls);
    }
    HR_TRY(check_values(path, name, values));
    m.columns.emplace(std::move(name), std::move(values));
  }
  int32_t chunks;
  if (read_i32(&chunks)) {
    m.chunk_count = chunks;
    int32_t len;
    if (read_i32(&len) && len > 0 && static_cast<size_t>(len) <= bytes.size() - at) {
      m.dataset.assign(reinterpret_cast<const char*>(bytes.data() + at), static_cast<size_t>(len));
    }
  }
  return m;
}

}  // namespace

const std::vector<float>* ImportanceMatrix::find(std::string_view tensor) const {
  auto it = columns.find(std::string(tensor));
  return it == columns.end() ? nullptr : &it->second;
}

util::Result<ImportanceMatrix> load_imatrix(const std::string& path) {
  HR_ASSIGN_OR_RETURN(auto mapping, util::MappedFile::open(path));
  const std::span<const uint8_t> bytes = mapping.bytes();
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) {
    HR_ASSIGN_OR_RETURN(gguf::File file, gguf::File::parse(bytes, path));
    return load_gguf(path, file);
  }
  return load_legacy(path, bytes);
}

}  // namespace convert
