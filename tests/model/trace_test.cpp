// The trace hook: a forward pass hands out its named intermediates (llama.cpp's names), they are
// what the names say — checked against float64 recomputations from the file's own tensors — and
// tracing changes no result.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/scheduler.h"
#include "model/synth.h"
#include "testing/testing.h"

namespace {

struct Traced {
  std::map<std::string, std::vector<float>> tensors;  // "attn_norm.0" → rows
  std::map<std::string, int64_t> width;
  std::vector<float> logits;
};

Traced run(const std::string& path, const std::vector<int32_t>& ids, bool trace, int ubatch = 64) {
  Traced out;
  engine::EngineOptions o{.model_path = path,
                          .request = {.n_ctx = 64,
                                      .k_type = tensor::DType::kF32,
                                      .v_type = tensor::DType::kF32,
                                      .n_ubatch = ubatch,
                                      .logits_all_positions = true}};
  if (trace) {
    o.trace = [&out](const model::TracedTensor& t) {
      const std::string key =
          t.layer >= 0 ? std::string(t.name) + "." + std::to_string(t.layer) : std::string(t.name);
      auto& rows = out.tensors[key];
      rows.insert(rows.end(), t.data, t.data + t.n_tokens * t.width);
      out.width[key] = t.width;
    };
  }
  auto e = engine::Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.error().message();
  if (!e.ok()) return out;
  auto logits = engine::prompt_logits(**e, ids);
  EXPECT_TRUE(logits.ok());
  if (logits.ok()) out.logits = *logits;
  return out;
}

std::vector<double> f32_tensor(const gguf::File& file, const std::string& name) {
  const auto* t = file.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  EXPECT_EQ(t->type, gguf::TensorType::kF32) << name;
  const float* v = reinterpret_cast<const float*>(t->data.data());
  return std::vector<double>(v, v + t->n_bytes / sizeof(float));
}

// y = x / sqrt(mean(x²) + eps) ⊙ w, one row, in float64.
std::vector<double> rmsnorm(const float* x, const std::vector<double>& w, double eps) {
  const size_t n = w.size();
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double scale = 1.0 / std::sqrt(ss / n + eps);
  std::vector<double> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
  return y;
}

double max_rel(const float* got, const std::vector<double>& want) {
  double m = 0, top = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    m = std::max(m, std::fabs(got[i] - want[i]));
    top = std::max(top, std::fabs(want[i]));
  }
  return m / top;
}

TEST(Trace, Stories260KIntermediatesAreWhatTheirNamesSay) {
  const std::string path = (testing_util::shared_dir() / "models/stories260K.gguf").string();
  auto opened = gguf::File::open(path);
  ASSERT_TRUE(opened.ok());
  const gguf::File& file = *opened;
  auto spec = model::spec_from_gguf(file);
  ASSERT_TRUE(spec.ok());
  const int64_t H = spec->n_embd, V = spec->n_vocab;
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 290};
  const Traced t = run(path, ids, true);
  ASSERT_FALSE(t.logits.empty());

  // Every layer hands out the same steps, in llama.cpp's names.
  for (int il = 0; il < spec->n_layer; ++il) {
    for (const char* name :
         {"attn_norm", "Qcur", "Kcur", "Vcur", "attn_out", "ffn_inp", "ffn_out", "l_out"}) {
      const std::string key = std::string(name) + "." + std::to_string(il);
      ASSERT_EQ(t.tensors.count(key), 1u) << key;
      EXPECT_EQ(t.tensors.at(key).size(), ids.size() * t.width.at(key)) << key;
    }
  }
  // inp_embd: the embedding rows of the tokens.
  const auto embd = f32_tensor(file, "token_embd.weight");
  const auto& x0 = t.tensors.at("inp_embd");
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < H; ++j) ASSERT_EQ(x0[i * H + j], embd[ids[i] * H + j]);
  }
  // attn_norm.0 = RMSNorm(inp_embd) ⊙ blk.0.attn_norm.weight.
  const auto w0 = f32_tensor(file, "blk.0.attn_norm.weight");
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_LE(max_rel(&t.tensors.at("attn_norm.0")[i * H], rmsnorm(&x0[i * H], w0, spec->rms_eps)),
              1e-5);
  }
  // ffn_inp = l_out of the layer before + attn_out; l_out = ffn_inp + ffn_out.
  const auto& l_out = t.tensors.at("l_out.1");
  for (int64_t j = 0; j < static_cast<int64_t>(ids.size()) * H; ++j) {
    EXPECT_NEAR(t.tensors.at("ffn_inp.2")[j], l_out[j] + t.tensors.at("attn_out.2")[j], 1e-5);
  }
  // result_norm = RMSNorm(last l_out) ⊙ output_norm, and the logits are output · result_norm.
  const std::string last = "l_out." + std::to_string(spec->n_layer - 1);
  const auto norm = f32_tensor(file, "output_norm.weight");
  const auto output = file.find_tensor("output.weight") ? f32_tensor(file, "output.weight") : embd;
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto want = rmsnorm(&t.tensors.at(last)[i * H], norm, spec->rms_eps);
    const float* got = &t.tensors.at("result_norm")[i * H];
    EXPECT_LE(max_rel(got, want), 1e-5);
    std::vector<double> logits(V);
    for (int64_t v = 0; v < V; ++v) {
      for (int64_t j = 0; j < H; ++j) logits[v] += output[v * H + j] * got[j];
    }
    EXPECT_LE(max_rel(&t.logits[i * V], logits), 1e-5);
  }
  // Tracing reads, never changes: the logits are those of an untraced run, bit for bit.
  EXPECT_EQ(run(path, ids, false).logits, t.logits);
}

// A divergence is found at the layer where it starts: the traces of a prefill and of one token
// at a time agree step by step (to f32 rounding), for every layer of Gemma 4 with its shared KV
// layers and per-layer inputs.
TEST(Trace, Gemma4PrefillAndDecodeAgreeAtEveryLayer) {
  auto w = model::synth_writer({.arch = "gemma4", .shape = "tiny-e"});
  ASSERT_TRUE(w.ok());
  const auto path = (testing_util::temp_dir() / "tiny-e.gguf").string();
  ASSERT_TRUE(w->write(path).ok());
  const auto ids = testing_util::spread_token_ids(12);
  const Traced prefill = run(path, ids, true, 64), decode = run(path, ids, true, 1);
  ASSERT_FALSE(prefill.tensors.empty());
  EXPECT_TRUE(prefill.tensors.count("inp_per_layer"));
  EXPECT_TRUE(prefill.tensors.count("Kcur.0"));
  for (const auto& [key, rows] : prefill.tensors) {
    ASSERT_EQ(decode.tensors.count(key), 1u) << key;
    const auto& other = decode.tensors.at(key);
    ASSERT_EQ(other.size(), rows.size()) << key;
    double worst = 0, top = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(rows[i] - other[i])));
      top = std::max(top, static_cast<double>(std::fabs(rows[i])));
    }
    EXPECT_LE(worst, 1e-5 * std::max(1.0, top)) << key;
  }
}

}  // namespace
