// Synth models with a real Gemma 4 shape's layer structure at small widths — every layer as the
// real model has it (sliding and full attention, KV sharing, per-layer inputs, its experts) — for
// the tests whose subject depends on the structure, not the widths: the decode step's kernel and
// copy budget (tests/model/decode_budget_test.cpp, and on a GPU cuda_forward_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>

#include "gguf/file.h"
#include "model/spec.h"
#include "model/synth.h"
#include "testing/testing.h"

namespace testing_util {

inline model::SynthShape structure_at_small_widths(const std::string& name,
                                                   float weight_std = 0.05f) {
  auto s = model::synth_shape("gemma4", name);
  EXPECT_TRUE(s.ok()) << s.error().message();
  model::SynthShape shape = *s;
  shape.n_embd = 64;
  shape.head_dim_sliding = 32;
  shape.head_dim_full = 64;
  shape.window = 8;
  if (shape.n_embd_per_layer > 0) shape.n_embd_per_layer = 32;
  const int widest = *std::max_element(shape.n_ff.begin(), shape.n_ff.end());
  for (int& f : shape.n_ff) f = std::max(32, f * 128 / widest);  // E2B's double-wide MLPs stay so
  if (shape.n_expert > 0) shape.n_ff_exp = 32;
  shape.n_vocab = 512;
  shape.n_ctx = 256;
  shape.weight_std = weight_std;
  return shape;
}

struct OpenedModel {
  std::optional<gguf::File> file;
  std::optional<model::Spec> spec;
};

// Writes the structure of `name` and opens it: q8_0 weights by default (every width is a multiple
// of 32, so the 8-bit activation paths run). Random weights of these widths make a chaotic network:
// a perturbation of one part in 10^4 (f16 KV) moves the logits by up to 4 % at the default
// spread, and 8-bit activations by as much as the logits themselves; a smaller `weight_std` calms
// it.
inline OpenedModel open_structure_model(const std::string& name, const std::string& type = "q8_0",
                                        float weight_std = 0.05f) {
  OpenedModel o;
  auto w = model::synth_writer({.arch = "gemma4", .type = type},
                               structure_at_small_widths(name, weight_std));
  EXPECT_TRUE(w.ok()) << w.error().message();
  if (!w.ok()) return o;
  const auto path = temp_dir() / (name + "-" + type + "-structure.gguf");
  EXPECT_TRUE(w->write(path.string()).ok());
  auto file = gguf::File::open(path.string());
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return o;
  o.file.emplace(std::move(*file));
  auto spec = model::spec_from_gguf(*o.file);
  EXPECT_TRUE(spec.ok()) << spec.error().message();
  if (spec.ok()) o.spec.emplace(std::move(*spec));
  return o;
}

}  // namespace testing_util
