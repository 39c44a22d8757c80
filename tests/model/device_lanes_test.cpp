// The device paths of a forward pass, run in CI on testing_util::EmulatedGpu (a backend with memory
// of its own that computes with the CPU kernels and checks the device contract on every call):
// whole-"GPU" passes, passes split between the CPU and the device (the first layers, and Gemma 4's
// per-layer-embedding lookup, on the host), and recorded single-token passes (HEADROOM_RECORD_
// PASSES). Because the emulator's kernels are the CPU backend's, every logit must equal the CPU
// path's bit for bit; a host pointer handed to a device op, a copy from unregistered memory or a
// replay called differently from its recording fails the pass with the emulator's message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>

#include "kernels/cpu/backend.h"
#include "model/model.h"
#include "model/synth.h"
#include "testing/emulated_gpu.h"
#include "testing/model_passes.h"
#include "testing/testing.h"
#include "util/thread_pool.h"

namespace {

using tensor::DType;

using Loaded = testing_util::LoadedModel;

// `ops` runs the model; with `host`, layers [0, n_host_layers) (and the PLE lookup when
// ple_on_host, the MoE experts when experts_on_host) run there, placed as the planner would
// (model::place), and the cache keeps those layers in host memory.
Loaded load(const gguf::File& file, const model::Spec& spec, kernels::Backend& ops, int ubatch,
            DType kv_type, kernels::Backend* host = nullptr, int n_host_layers = 0,
            bool ple_on_host = false, bool experts_on_host = false, bool hidden = false) {
  Loaded r;
  const model::Placement placement =
      model::place(spec, ops.host_memory() ? 0 : 1, n_host_layers, ple_on_host, experts_on_host);
  auto m = model::load_model(
      file, spec, ops,
      {.max_batch = ubatch, .host = host, .placement = placement, .hidden = hidden});
  EXPECT_TRUE(m.ok()) << m.error().message();
  if (!m.ok()) return r;
  r.model = std::move(*m);
  auto cache = kv::Cache::create(
      model::kv_layers(spec),
      {.n_ctx = 64, .n_ubatch = ubatch, .n_slots = 1, .k_type = kv_type, .v_type = kv_type},
      ops.host_memory() ? nullptr : &ops, placement.layer_device);
  EXPECT_TRUE(cache.ok()) << cache.error().message();
  if (cache.ok()) r.cache.emplace(std::move(*cache));
  return r;
}

std::vector<float> run(Loaded& r, const std::vector<int32_t>& ids, int prefill, int ubatch,
                       int n_vocab) {
  return testing_util::logits_of_passes(r, ids, prefill, ubatch, n_vocab);
}

using testing_util::same_bits;

// run(), with each position's hidden state into hidden ([ids][n_embd]).
std::vector<float> run_hidden(Loaded& r, const std::vector<int32_t>& ids, const model::Spec& spec,
                              float* hidden) {
  return testing_util::logits_of_passes(r, ids, 12, 5, spec.n_vocab, hidden, spec.n_embd);
}

// Where a split may fall: no layer reads the KV cache of a layer on the other side.
std::vector<int> valid_splits(const model::Spec& spec) {
  std::vector<int> out;
  for (int n = 1; n <= spec.n_layer; ++n) {
    bool ok = true;
    for (const auto& l : spec.layers) ok = ok && ((l.il < n) == (l.kv_source < n));
    if (ok) out.push_back(n);
  }
  return out;
}

struct Model {
  std::string path;
  std::optional<gguf::File> file;
  std::optional<model::Spec> spec;
};

Model open_model(const std::string& arch, const std::string& shape) {
  Model m;
  if (shape == "stories260K") {
    m.path = (testing_util::shared_dir() / "models/stories260K.gguf").string();
  } else {
    auto w = model::synth_writer({.arch = arch, .shape = shape});
    EXPECT_TRUE(w.ok()) << w.error().message();
    if (!w.ok()) return m;
    m.path = (testing_util::temp_dir() / (shape + "-lanes.gguf")).string();
    EXPECT_TRUE(w->write(m.path).ok());
  }
  auto file = gguf::File::open(m.path);
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return m;
  m.file.emplace(std::move(*file));
  auto spec = model::spec_from_gguf(*m.file);
  EXPECT_TRUE(spec.ok()) << spec.error().message();
  if (spec.ok()) m.spec.emplace(std::move(*spec));
  return m;
}

class DeviceLanes : public ::testing::TestWithParam<std::string> {
 protected:
  // The parameter's model: the shipped stories260K (llama) or a tiny Gemma 4 shape.
  static Model open_param_model() {
    const std::string shape = GetParam();
    return open_model(shape == "stories260K" ? "llama" : "gemma4", shape);
  }
};

// Whole-device and split passes give the CPU path's logits bit for bit, for a prompt longer than
// the sliding window, prefilled in micro-batches of 5 and then decoded token by token, with f16
// and q8_0 KV caches, at every split that keeps KV-sharing layers together, with and without the
// PLE table and the MoE experts on the host.
TEST_P(DeviceLanes, WholeAndSplitPassesGiveTheCpuLogits) {
  Model m = open_param_model();
  ASSERT_TRUE(m.spec);
  const model::Spec& spec = *m.spec;
  const auto ids = testing_util::spread_token_ids(24);
  util::ThreadPool pool(2);
  const int64_t cols = model::max_matmul_cols(spec);
  for (DType kv : {DType::kF16, DType::kQ8_0}) {
    SCOPED_TRACE("kv " + std::string(gguf::tensor_type_name(kv)));
    kernels::cpu::CpuBackend cpu(pool, 8, cols);
    Loaded on_cpu = load(*m.file, spec, cpu, 8, kv);
    const auto expected = run(on_cpu, ids, 12, 5, spec.n_vocab);
    {
      testing_util::EmulatedGpu gpu(pool, 8, cols);
      Loaded whole = load(*m.file, spec, gpu, 8, kv);
      EXPECT_TRUE(same_bits(run(whole, ids, 12, 5, spec.n_vocab), expected)) << "whole device";
    }
    bool moe = false;
    for (const auto& l : spec.layers) moe = moe || l.is_moe();
    std::vector<int> splits = valid_splits(spec);
    splits.insert(splits.begin(), 0);  // 0: no layer on the host, only the tables below
    for (int n : splits) {
      for (int what = 0; what < 4; ++what) {
        const bool ple_on_host = what & 1, experts_on_host = what & 2;
        if ((ple_on_host && spec.n_embd_per_layer == 0) || (experts_on_host && !moe)) continue;
        if (n == 0 && what == 0) continue;  // the whole-device case above
        SCOPED_TRACE("split after " + std::to_string(n) + " layers" +
                     (ple_on_host ? ", PLE table on the host" : "") +
                     (experts_on_host ? ", experts on the host" : ""));
        testing_util::EmulatedGpu gpu(pool, 8, cols);
        kernels::cpu::CpuBackend host(pool, 8, cols);
        Loaded split = load(*m.file, spec, gpu, 8, kv, &host, n, ple_on_host, experts_on_host);
        EXPECT_TRUE(same_bits(run(split, ids, 12, 5, spec.n_vocab), expected));
      }
    }
  }
}

// Decode passes recorded once and replayed (the default; HEADROOM_RECORD_PASSES=0 turns it off) —
// upload, layers, logits and their top-k selection in one recording — select what passes run op by
// op select; the emulator checks that every replay drops exactly the recorded calls.
TEST_P(DeviceLanes, RecordedPassesReplayTheSameCalls) {
  Model m = open_param_model();
  ASSERT_TRUE(m.spec);
  const model::Spec& spec = *m.spec;
  const auto ids = testing_util::spread_token_ids(20);
  util::ThreadPool pool(2);
  const int64_t cols = model::max_matmul_cols(spec);
  for (int k : {1, 40}) {
    SCOPED_TRACE("top " + std::to_string(k));
    testing_util::Selections expected;
    {
      testing_util::ScopedEnv op_by_op("HEADROOM_RECORD_PASSES", "0");
      testing_util::EmulatedGpu plain_gpu(pool, 8, cols);
      Loaded plain = load(*m.file, spec, plain_gpu, 8, DType::kF16);
      expected = testing_util::selections_of_passes(plain, ids, 6, 6, spec.n_vocab, k);
      EXPECT_EQ(plain_gpu.replays(), 0);
    }
    testing_util::ScopedEnv record("HEADROOM_RECORD_PASSES", std::nullopt);  // the default
    testing_util::EmulatedGpu gpu(pool, 8, cols);
    Loaded recorded = load(*m.file, spec, gpu, 8, DType::kF16);
    const auto got = testing_util::selections_of_passes(recorded, ids, 6, 6, spec.n_vocab, k);
    EXPECT_EQ(got.ids, expected.ids);
    EXPECT_TRUE(same_bits(got.logits, expected.logits));
    // 14 single-token passes: the first recorded, the other 13 replayed.
    EXPECT_EQ(gpu.replays(), 13);
  }
}

// The top-k selections of device passes are those of the CPU's whole logits, ties to the lower id.
TEST_P(DeviceLanes, DeviceSelectionsAreTheTopOfTheCpuLogits) {
  Model m = open_param_model();
  ASSERT_TRUE(m.spec);
  const model::Spec& spec = *m.spec;
  const auto ids = testing_util::spread_token_ids(16);
  util::ThreadPool pool(2);
  const int64_t cols = model::max_matmul_cols(spec);
  kernels::cpu::CpuBackend cpu(pool, 8, cols);
  Loaded on_cpu = load(*m.file, spec, cpu, 8, DType::kF16);
  const auto logits = run(on_cpu, ids, 6, 6, spec.n_vocab);
  testing_util::EmulatedGpu gpu(pool, 8, cols);
  Loaded on_gpu = load(*m.file, spec, gpu, 8, DType::kF16);
  const int k = 8;
  const auto got = testing_util::selections_of_passes(on_gpu, ids, 6, 6, spec.n_vocab, k);
  for (size_t p = 0; p < ids.size(); ++p) {
    std::vector<int32_t> order(spec.n_vocab);
    std::iota(order.begin(), order.end(), 0);
    const float* row = logits.data() + p * spec.n_vocab;
    std::stable_sort(order.begin(), order.end(),
                     [row](int32_t a, int32_t b) { return row[a] > row[b]; });
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(got.ids[p * k + j], order[j]) << "position " << p << ", rank " << j;
      EXPECT_EQ(got.logits[p * k + j], row[order[j]]) << "position " << p << ", rank " << j;
    }
  }
}

// The hidden states a device hands back (Outputs::hidden, what a Gemma 4 assistant drafter starts
// from) are the CPU path's bit for bit: with whole logits and with top-k selections, in prefill
// micro-batches, in decode passes op by op, recorded, and replayed — a replay of a pass recorded
// without them is never used for one that wants them, nor the other way round. Without
// LoadOptions::hidden a device refuses them in the pass's status.
TEST_P(DeviceLanes, HiddenStatesComeBackAsOnTheCpu) {
  Model m = open_param_model();
  ASSERT_TRUE(m.spec);
  const model::Spec& spec = *m.spec;
  const auto ids = testing_util::spread_token_ids(20);
  const size_t rows = ids.size() * spec.n_embd;
  util::ThreadPool pool(2);
  const int64_t cols = model::max_matmul_cols(spec);
  kernels::cpu::CpuBackend cpu(pool, 8, cols);
  Loaded on_cpu = load(*m.file, spec, cpu, 8, DType::kF16);
  std::vector<float> expected(rows), expected_top(rows);
  const auto logits = run_hidden(on_cpu, ids, spec, expected.data());
  on_cpu.cache->release(0);
  testing_util::selections_of_passes(on_cpu, ids, 6, 6, spec.n_vocab, 8, expected_top.data(),
                                     spec.n_embd);
  for (bool record : {false, true}) {
    SCOPED_TRACE(record ? "recorded passes" : "op by op");
    testing_util::ScopedEnv env("HEADROOM_RECORD_PASSES",
                                record ? std::nullopt : std::optional<std::string>("0"));
    testing_util::EmulatedGpu gpu(pool, 8, cols);
    Loaded on_gpu = load(*m.file, spec, gpu, 8, DType::kF16, nullptr, 0, false, false, true);
    std::vector<float> got(rows, NAN);
    EXPECT_TRUE(same_bits(run_hidden(on_gpu, ids, spec, got.data()), logits));
    EXPECT_TRUE(same_bits(got, expected)) << "whole logits";
    // Top-k passes in a fresh cache: decode passes with hidden states, then without, then with.
    std::fill(got.begin(), got.end(), NAN);
    on_gpu.cache->release(0);
    const auto with = testing_util::selections_of_passes(on_gpu, ids, 6, 6, spec.n_vocab, 8,
                                                         got.data(), spec.n_embd);
    EXPECT_TRUE(same_bits(got, expected_top)) << "top-k passes";
    on_gpu.cache->release(0);
    const auto without = testing_util::selections_of_passes(on_gpu, ids, 6, 6, spec.n_vocab, 8);
    EXPECT_EQ(without.ids, with.ids);
    std::fill(got.begin(), got.end(), NAN);
    on_gpu.cache->release(0);
    testing_util::selections_of_passes(on_gpu, ids, 6, 6, spec.n_vocab, 8, got.data(), spec.n_embd);
    EXPECT_TRUE(same_bits(got, expected_top)) << "top-k passes after passes without hidden states";
    // Each run is a 6-token pass and 14 single-token passes: recorded with hidden states in the
    // first run (13 replays) and replayed in the third (15), recorded again without them in the
    // second (13 replays).
    EXPECT_EQ(gpu.replays(), record ? 41 : 0);
  }
  testing_util::EmulatedGpu gpu(pool, 8, cols);
  Loaded plain = load(*m.file, spec, gpu, 8, DType::kF16);
  ASSERT_TRUE(plain.cache->reserve(0, 1));
  std::vector<float> one_logits(spec.n_vocab), one_hidden(spec.n_embd);
  const int32_t token = ids[0], pos = 0, slot = 0;
  const model::Batch batch{
      .tokens = std::span(&token, 1), .pos = std::span(&pos, 1), .slot = std::span(&slot, 1)};
  const util::Status s = plain.model->forward(
      batch, *plain.cache, {.logits = one_logits.data(), .hidden = one_hidden.data()});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("LoadOptions::hidden"), std::string::npos)
      << s.error().message();
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeviceLanes,
                         ::testing::Values("stories260K", "tiny-e", "tiny-moe", "tiny-dense-keqv"),
                         [](const auto& p) { return testing_util::test_name(p.param); });

// A split between a layer and the layer whose KV cache it reads is refused with both named.
TEST(DeviceLanesErrors, ASplitThroughKvSharingIsRefused) {
  Model m = open_model("gemma4", "tiny-e");
  ASSERT_TRUE(m.spec);
  int bad = -1;
  for (int n = 1; n < m.spec->n_layer && bad < 0; ++n) {
    for (const auto& l : m.spec->layers) {
      if ((l.il < n) != (l.kv_source < n)) bad = n;
    }
  }
  ASSERT_GT(bad, 0) << "tiny-e has KV-sharing layers";
  util::ThreadPool pool(1);
  testing_util::EmulatedGpu gpu(pool, 8, model::max_matmul_cols(*m.spec));
  auto cache = kv::Cache::create(model::kv_layers(*m.spec), {.n_ctx = 16, .n_ubatch = 8}, &gpu,
                                 model::place(*m.spec, 1, bad).layer_device);
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.error().message().find("reads layer"), std::string::npos)
      << cache.error().message();
}

// The emulator itself: a host pointer handed to a device op fails the pass with its name.
TEST(DeviceLanesErrors, TheEmulatorNamesAHostPointer) {
  util::ThreadPool pool(1);
  testing_util::EmulatedGpu gpu(pool, 8, 64);
  auto device = gpu.allocate(64 * sizeof(float));
  ASSERT_TRUE(device.ok());
  std::vector<float> host(64, 1.0f);
  gpu.add(static_cast<float*>(*device), host.data(), 64);
  auto s = gpu.synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("add: x"), std::string::npos) << s.error().message();
  gpu.release(*device);
}

}  // namespace
