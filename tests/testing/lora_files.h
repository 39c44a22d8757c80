// LoRA adapter files for tests that need many variants quickly (good ones, and each kind of bad
// one): random pairs in llama.cpp's GGUF adapter form for the targets of a base model, written
// with gguf::Writer. The oracle tests write theirs with NumPy instead
// (tests/reference/write_lora_adapter.py).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"

namespace testing_util {

struct AdapterFileSpec {
  int rank = 4;
  float alpha = 8.0f;
  uint32_t seed = 1;
  float sd = 0.05f;  // of A's and B's values
  std::vector<std::string> targets = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                      "ffn_gate", "ffn_up", "ffn_down"};
  std::string arch;  // empty: the base model's
  // Edits the tensors before they are written (name, ne, values): the bad-input cases.
  std::function<void(std::string& name, std::vector<uint64_t>& ne, std::vector<float>& v)> edit;
  std::vector<std::string> extra_tensors;  // more pairs by base name (e.g. token_embd.weight)
};

// Writes an adapter for `base` (every layer's targets the file has) to `path`.
inline void write_adapter(const gguf::File& base, const std::filesystem::path& path,
                          const AdapterFileSpec& spec = {}) {
  gguf::Writer w;
  auto arch = base.get_string("general.architecture");
  ASSERT_TRUE(arch.ok() && arch->has_value());
  w.set("general.architecture",
        gguf::MetaValue::string(spec.arch.empty() ? std::string(**arch) : spec.arch));
  w.set("general.type", gguf::MetaValue::string("adapter"));
  w.set("adapter.type", gguf::MetaValue::string("lora"));
  w.set("adapter.lora.alpha", gguf::MetaValue::f32(spec.alpha));
  std::vector<std::string> names;
  for (const gguf::TensorInfo& t : base.tensors()) {
    for (const std::string& target : spec.targets) {
      const std::string suffix = "." + target + ".weight";
      if (t.name.starts_with("blk.") && t.name.ends_with(suffix)) names.emplace_back(t.name);
    }
  }
  names.insert(names.end(), spec.extra_tensors.begin(), spec.extra_tensors.end());
  std::mt19937 rng(spec.seed);
  std::normal_distribution<float> dist(0.0f, spec.sd);
  std::vector<std::vector<uint8_t>> blobs;
  blobs.reserve(2 * names.size());  // the writer keeps spans of them until write()
  for (const std::string& name : names) {
    const gguf::TensorInfo* t = base.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    for (const bool is_a : {true, false}) {
      std::string half = name + (is_a ? ".lora_a" : ".lora_b");
      std::vector<uint64_t> ne = is_a ? std::vector<uint64_t>{t->ne[0], uint64_t(spec.rank)}
                                      : std::vector<uint64_t>{uint64_t(spec.rank), t->ne[1]};
      std::vector<float> values(ne[0] * ne[1]);
      for (float& v : values) v = dist(rng);
      if (spec.edit) spec.edit(half, ne, values);
      if (half.empty()) continue;  // the edit dropped it
      std::vector<uint8_t> bytes(values.size() * sizeof(float));
      std::memcpy(bytes.data(), values.data(), bytes.size());
      blobs.push_back(std::move(bytes));
      w.add_tensor(half, gguf::TensorType::kF32, ne, blobs.back());
    }
  }
  ASSERT_TRUE(w.write(path.string()).ok());
}

}  // namespace testing_util
