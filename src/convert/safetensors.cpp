// Safetensors parsing and validation, and checkpoints of one file or index-listed shards.
#include "convert/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>

namespace convert {
namespace {

using Json = nlohmann::json;

// Bytes per element of the dtypes the format defines (0: unknown).
int64_t dtype_bytes(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
      dtype == "F8_E5M2") {
    return 1;
  }
  return 0;
}

// A header larger than this is not a real header (the largest real ones are a few MB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

util::Result<SafeTensor> parse_entry(const std::string& name, const Json& entry,
                                     std::span<const uint8_t> data, std::string_view file) {
  auto bad = [&](std::string_view what) {
    return util::errorf("safetensors {}: tensor {}: {} — the file is damaged or not safetensors",
                        file, name, what);
  };
  if (!entry.is_object()) return bad("its header entry is not an object");
  SafeTensor t;
  t.name = name;
  t.file = std::string(file);
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) return bad("no dtype");
  t.dtype = dtype->get<std::string>();
  const int64_t element_bytes = dtype_bytes(t.dtype);
  if (element_bytes == 0) return bad("unknown dtype '" + t.dtype + "'");
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) return bad("no shape");
  int64_t n = 1;
  for (const Json& d : *shape) {
    if (!d.is_number_unsigned()) return bad("a shape entry is not a non-negative integer");
    const uint64_t dim = d.get<uint64_t>();
    if (dim >
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / std::max<int64_t>(n, 1))) {
      return bad("its shape overflows");
    }
    t.shape.push_back(static_cast<int64_t>(dim));
    n *= static_cast<int64_t>(dim);
  }
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return bad("no data_offsets [begin, end]");
  }
  const uint64_t begin = (*offsets)[0].get<uint64_t>();
  const uint64_t end = (*offsets)[1].get<uint64_t>();
  if (begin > end || end > data.size()) {
    return bad(fmt::format("bytes {}..{} lie outside the {}-byte data section (truncated?)", begin,
                           end, data.size()));
  }
  if (n > std::numeric_limits<int64_t>::max() / element_bytes ||
      end - begin != static_cast<uint64_t>(n * element_bytes)) {
    return bad(fmt::format("{} bytes for {} {} values", end - begin, n, t.dtype));
  }
  t.data = data.subspan(begin, end - begin);
  return t;
}

}  // namespace

int64_t SafeTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

util::Result<tensor::DType> SafeTensor::gguf_type() const {
  if (dtype == "F32") return tensor::DType::kF32;
  if (dtype == "F16") return tensor::DType::kF16;
  if (dtype == "BF16") return tensor::DType::kBF16;
  return util::errorf(
      "convert: tensor {} in {} is {}; headroom converts BF16, F16 and F32 "
      "checkpoints — dequantize or cast the checkpoint first",
      name, file, dtype);
}

util::Result<SafetensorsFile> SafetensorsFile::parse(std::span<const uint8_t> bytes,
                                                     std::string_view file) {
  if (bytes.size() < 8) {
    return util::errorf("safetensors {}: {} bytes is too short for a header — truncated?", file,
                        bytes.size());
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | bytes[static_cast<size_t>(i)];
  if (header_bytes > kMaxHeaderBytes || header_bytes > bytes.size() - 8) {
    return util::errorf(
        "safetensors {}: header length {} does not fit the {}-byte file — "
        "truncated, or not a safetensors file",
        file, header_bytes, bytes.size());
  }
  const auto header_text = bytes.subspan(8, header_bytes);
  Json header = Json::parse(header_text.begin(), header_text.end(), nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    return util::errorf("safetensors {}: the header is not a JSON object — not a safetensors file",
                        file);
  }
  const std::span<const uint8_t> data = bytes.subspan(8 + header_bytes);
  SafetensorsFile out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) {
        return util::errorf("safetensors {}: __metadata__ is not an object", file);
      }
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (m->is_string()) out.metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    HR_ASSIGN_OR_RETURN(SafeTensor t, parse_entry(it.key(), *it, data, file));
    out.tensors_.push_back(std::move(t));
  }
  // Header order is JSON-object order (sorted); data order is what readers stream through.
  std::sort(out.tensors_.begin(), out.tensors_.end(),
            [](const SafeTensor& a, const SafeTensor& b) { return a.data.data() < b.data.data(); });
  return out;
}

util::Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  HR_ASSIGN_OR_RETURN(util::MappedFile mapping, util::MappedFile::open(path));
  auto shared = std::make_shared<util::MappedFile>(std::move(mapping));
  HR_ASSIGN_OR_RETURN(SafetensorsFile file, parse(shared->bytes(), path));
  file.mapping_ = std::move(shared);
  return file;
}

util::Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  Checkpoint c;
  c.dir_ = dir;
  const fs::path root(dir);
  const fs::path index_path = root / "model.safetensors.index.json";
  std::vector<std::string> shard_names;
  Json weight_map;
  if (fs::exists(index_path)) {
    HR_ASSIGN_OR_RETURN(util::MappedFile index_file, util::MappedFile::open(index_path.string()));
    const auto text = index_file.bytes();
    Json index = Json::parse(text.begin(), text.end(), nullptr, false);
    if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") ||
        !index["weight_map"].is_object()) {
      return util::errorf("convert: {} has no weight_map object — not a safetensors index",
                          index_path.string());
    }
    weight_map = index["weight_map"];
    std::set<std::string> seen;
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      if (!it->is_string()) {
        return util::errorf("convert: {}: tensor {} maps to a non-string", index_path.string(),
                            it.key());
      }
      const std::string shard = it->get<std::string>();
      if (shard.find('/') != std::string::npos || shard.find("..") != std::string::npos) {
        return util::errorf("convert: {}: shard name '{}' is not a file in the checkpoint",
                            index_path.string(), shard);
      }
      if (!fs::exists(root / shard)) {
        return util::errorf(
            "convert: shard {} is missing (the index lists tensor {} in it) — "
            "download every shard of the checkpoint",
            (root / shard).string(), it.key());
      }
      if (seen.insert(shard).second) shard_names.push_back(shard);
    }
  } else if (fs::exists(root / "model.safetensors")) {
    shard_names.push_back("model.safetensors");
  } else {
    return util::errorf(
        "convert: {} has neither model.safetensors nor "
        "model.safetensors.index.json — not a Hugging Face safetensors checkpoint",
        dir);
  }
  std::sort(shard_names.begin(), shard_names.end());
  c.files_.reserve(shard_names.size());
  for (const std::string& shard : shard_names) {
    HR_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open((root / shard).string()));
    c.files_.push_back(std::move(f));
  }
  for (const SafetensorsFile& f : c.files_) {
    for (const SafeTensor& t : f.tensors()) {
      if (!c.index_.emplace(t.name, &t).second) {
        return util::errorf(
            "convert: tensor {} appears twice ({} and {}) — the checkpoint mixes "
            "two models",
            t.name, c.index_[t.name]->file, t.file);
      }
      c.order_.push_back(&t);
    }
  }
  for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
    const SafeTensor* t = c.find(it.key());
    const std::string expected = (root / it->get<std::string>()).string();
    if (!t || t->file != expected) {
      return util::errorf(
          "convert: the index puts tensor {} in {}, which does not hold it — the "
          "shard is from another download; fetch it again",
          it.key(), expected);
    }
  }
  return c;
}

const SafeTensor* Checkpoint::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

}  // namespace convert
