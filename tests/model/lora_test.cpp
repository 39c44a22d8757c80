// model::LoraAdapter and the adapter slots: good files open and count what they leave out, every
// kind of bad file is refused with one line naming the file and the tensor, the slots hold what
// was planned; and adapters run on every lane — the emulated GPU whole and split gives the CPU's
// logits bit for bit, and tokens of several adapters (and none) in one pass give each its own
// logits. (Their logits against the merged-weight reference: gemma4_oracle_test.cpp.)
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "kernels/cpu/backend.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/synth.h"
#include "testing/emulated_gpu.h"
#include "testing/lora_files.h"
#include "testing/testing.h"
#include "util/thread_pool.h"

namespace {

namespace fs = std::filesystem;
using testing_util::AdapterFileSpec;
using testing_util::write_adapter;

// This test's directory (testing_util::temp_dir() empties it on every call).
fs::path test_dir() {
  return testing_util::test_dir("lora");
}

struct Base {
  std::string path;
  std::optional<gguf::File> file;
  std::optional<model::Spec> spec;
};

Base open_base(const std::string& arch, const std::string& shape, bool shared_kv_tensors = false) {
  Base b;
  if (shape == "stories260K") {
    b.path = (testing_util::shared_dir() / "models/stories260K.gguf").string();
  } else {
    auto w =
        model::synth_writer({.arch = arch, .shape = shape, .shared_kv_tensors = shared_kv_tensors});
    EXPECT_TRUE(w.ok()) << w.error().message();
    if (!w.ok()) return b;
    b.path = (test_dir() / (shape + ".gguf")).string();
    EXPECT_TRUE(w->write(b.path).ok());
  }
  auto file = gguf::File::open(b.path);
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return b;
  b.file.emplace(std::move(*file));
  auto spec = model::spec_from_gguf(*b.file);
  EXPECT_TRUE(spec.ok()) << spec.error().message();
  if (spec.ok()) b.spec.emplace(std::move(*spec));
  return b;
}

// The error of opening an adapter written for `base` with `spec`, checked to be one line that
// names the file; "" when it opened.
std::string open_error(const Base& base, const AdapterFileSpec& spec,
                       const Base* written_for = nullptr) {
  const fs::path path = test_dir() / "adapter.gguf";
  write_adapter(written_for ? *written_for->file : *base.file, path, spec);
  auto a = model::LoraAdapter::open(path.string(), *base.file, *base.spec);
  if (a.ok()) return "";
  const std::string& m = a.error().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_NE(m.find(path.string()), std::string::npos) << "names the file: " << m;
  return m;
}

TEST(LoraAdapter, OpensAndLeavesOutTheKvOfSharedLayers) {
  // tiny-e: 8 layers, the last 3 KV-shared; the file carries their (unused) k and v.
  const Base base = open_base("gemma4", "tiny-e", /*shared_kv_tensors=*/true);
  ASSERT_TRUE(base.spec);
  const fs::path path = test_dir() / "a.gguf";
  write_adapter(*base.file, path, {.rank = 6, .alpha = 12});
  auto a = model::LoraAdapter::open(path.string(), *base.file, *base.spec);
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_EQ(a->n_ignored(), 3 * 2);
  EXPECT_EQ(a->max_rank(), 6);
  EXPECT_FLOAT_EQ(a->alpha(), 12.0f);
  EXPECT_FLOAT_EQ(a->factor(a->pairs().front()), 2.0f);
  int shared_pairs = 0;
  for (const model::LoraPair& p : a->pairs()) {
    shared_pairs += !base.spec->layers[p.il].owns_kv();
    EXPECT_TRUE(base.spec->layers[p.il].owns_kv() ||
                (p.target != model::LoraTarget::kK && p.target != model::LoraTarget::kV));
  }
  EXPECT_EQ(shared_pairs, 3 * 5) << "q, o, gate, up and down of the shared layers apply";
}

TEST(LoraAdapter, RefusesBadFilesInOneLineNamingTheTensor) {
  const Base base = open_base("gemma4", "tiny-e");
  const Base other = open_base("gemma4", "tiny-moe");
  ASSERT_TRUE(base.spec && other.spec);
  // The base model itself given as an adapter.
  {
    auto a = model::LoraAdapter::open(base.path, *base.file, *base.spec);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().message().find("is not an adapter"), std::string::npos)
        << a.error().message();
  }
  EXPECT_NE(open_error(base, {.arch = "llama"}).find("adapter for a llama model"),
            std::string::npos);
  // A pair missing its lora_b.
  auto drop_b = [](std::string& n, auto&, auto&) {
    if (n == "blk.2.attn_q.weight.lora_b") n.clear();
  };
  EXPECT_NE(open_error(base, {.edit = drop_b}).find("blk.2.attn_q.weight.lora_a has no lora_b"),
            std::string::npos);
  // Halves of two ranks.
  auto rank = [](std::string& n, std::vector<uint64_t>& ne, std::vector<float>& v) {
    if (n != "blk.1.ffn_down.weight.lora_b") return;
    ne[0] = 5;
    v.resize(ne[0] * ne[1]);
  };
  EXPECT_NE(open_error(base, {.edit = rank}).find("blk.1.ffn_down.weight.lora_a has rank 4 but"),
            std::string::npos);
  // An adapter for another base model (another shape of the same architecture).
  const std::string wrong = open_error(base, {}, &other);
  EXPECT_NE(wrong.find("another base model"), std::string::npos) << wrong;
  // A target headroom does not adapt, and a tensor the base has not.
  EXPECT_NE(open_error(base, {.extra_tensors = {"per_layer_model_proj.weight"}})
                .find("per_layer_model_proj.weight, which headroom does not adapt"),
            std::string::npos);
  auto rename = [](std::string& n, auto&, auto&) {
    if (n.starts_with("blk.0.attn_q.weight.")) n.replace(0, 5, "blk.40");
  };
  EXPECT_NE(open_error(base, {.edit = rename}).find("which the base model"), std::string::npos);
}

TEST(LoraAdapter, RefusesAnAdapterOfTheVOnALayerWhoseVIsItsK) {
  // tiny-dense-keqv's full layers have no attn_v: a v pair there has nothing to adapt.
  const Base base = open_base("gemma4", "tiny-dense-keqv");
  const Base llama_base = open_base("llama", "stories260K");
  ASSERT_TRUE(base.spec && llama_base.spec);
  int full = -1;
  for (const auto& l : base.spec->layers) {
    if (!l.has_v_proj) full = l.il;
  }
  ASSERT_GE(full, 0);
  auto to_v = [full](std::string& n, auto&, auto&) {
    const std::string k = "blk." + std::to_string(full) + ".attn_k.weight";
    if (n.starts_with(k)) n.replace(n.find("attn_k"), 6, "attn_v");
  };
  EXPECT_NE(open_error(base, {.targets = {"attn_k"}, .edit = to_v}).find("its V is the raw K"),
            std::string::npos);
}

// A model with adapter slots on `ops` (and, split, its first n_host layers on `host`).
struct AdapterModel {
  std::unique_ptr<model::Model> model;
  std::optional<kv::Cache> cache;
};

AdapterModel load(const Base& b, kernels::Backend& ops, model::LoraLimits lora,
                  kernels::Backend* host = nullptr, int n_host = 0, int n_slots = 1) {
  AdapterModel r;
  const model::Placement placement = model::place(*b.spec, ops.host_memory() ? 0 : 1, n_host);
  auto m = model::load_model(*b.file, *b.spec, ops,
                             {.max_batch = 9, .host = host, .placement = placement, .lora = lora});
  EXPECT_TRUE(m.ok()) << m.error().message();
  if (!m.ok()) return r;
  r.model = std::move(*m);
  auto cache =
      kv::Cache::create(model::kv_layers(*b.spec), {.n_ctx = 64, .n_ubatch = 9, .n_slots = n_slots},
                        ops.host_memory() ? nullptr : &ops, placement.layer_device);
  EXPECT_TRUE(cache.ok());
  if (cache.ok()) r.cache.emplace(std::move(*cache));
  return r;
}

// Every position's logits of `ids` in slot 0 under adapter `slot` at `scale` (−1: none):
// micro-batches of 5 for the first 12 tokens, then one token per pass.
std::vector<float> logits_under(AdapterModel& r, const std::vector<int32_t>& ids, int slot,
                                float scale, int n_vocab) {
  std::vector<float> logits(ids.size() * n_vocab);
  EXPECT_TRUE(r.cache->reserve(0, static_cast<int>(ids.size())));
  for (size_t start = 0; start < ids.size();) {
    const int n = static_cast<int>(std::min<size_t>(start < 12 ? 5 : 1, ids.size() - start));
    std::vector<int32_t> pos(n), cache_slot(n, 0), adapter(n, slot);
    std::vector<uint8_t> output(n, 1);
    std::vector<float> scales(n, scale);
    for (int i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(start + i);
    model::Batch batch{
        .tokens = std::span(ids).subspan(start, n),
        .pos = pos,
        .slot = cache_slot,
        .output = output,
        .adapter = slot >= 0 ? std::span<const int32_t>(adapter) : std::span<const int32_t>(),
        .adapter_scale = slot >= 0 ? std::span<const float>(scales) : std::span<const float>()};
    auto s = r.model->forward(batch, *r.cache, logits.data() + start * n_vocab);
    EXPECT_TRUE(s.ok()) << s.error().message();
    start += n;
  }
  return logits;
}

using testing_util::same_bits;

TEST(LoraSlots, HoldWhatWasPlannedAndFreeOnDetach) {
  const Base b = open_base("llama", "stories260K");
  ASSERT_TRUE(b.spec);
  util::ThreadPool pool(1);
  kernels::cpu::CpuBackend cpu(pool, 9, model::max_matmul_cols(*b.spec));
  AdapterModel r = load(b, cpu, {.max_loras = 2, .max_rank = 4});
  ASSERT_TRUE(r.model);
  EXPECT_EQ(r.model->lora_pool_bytes(),
            2 * model::lora_slot_bytes(*b.spec, 4, [](int) { return true; }));
  const fs::path dir = test_dir();
  write_adapter(*b.file, dir / "a.gguf", {.rank = 4});
  write_adapter(*b.file, dir / "big.gguf", {.rank = 8});
  auto a = model::LoraAdapter::open((dir / "a.gguf").string(), *b.file, *b.spec);
  auto big = model::LoraAdapter::open((dir / "big.gguf").string(), *b.file, *b.spec);
  ASSERT_TRUE(a.ok() && big.ok());
  auto too_big = r.model->attach_lora(*big);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.error().message().find("raise --max-lora-rank"), std::string::npos);
  auto s0 = r.model->attach_lora(*a), s1 = r.model->attach_lora(*a);
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_NE(*s0, *s1);
  auto full = r.model->attach_lora(*a);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().message().find("slots are taken"), std::string::npos);
  r.model->detach_lora(*s0);
  auto again = r.model->attach_lora(*a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *s0);
}

class LoraLanes : public ::testing::TestWithParam<std::string> {};

// The adapter changes the logits; on the emulated GPU, whole and split at each valid place, they
// are the CPU's bit for bit (its kernels are the CPU's), so the device path moves nothing but
// the memory.
TEST_P(LoraLanes, DeviceAndSplitPassesGiveTheCpuLogits) {
  const std::string shape = GetParam();
  const Base b = open_base(shape == "stories260K" ? "llama" : "gemma4", shape);
  ASSERT_TRUE(b.spec);
  const model::Spec& spec = *b.spec;
  const fs::path path = test_dir() / "a.gguf";
  write_adapter(*b.file, path);
  auto adapter = model::LoraAdapter::open(path.string(), *b.file, spec);
  ASSERT_TRUE(adapter.ok()) << adapter.error().message();
  const auto ids = testing_util::spread_token_ids(20);
  util::ThreadPool pool(2);
  const int64_t cols = model::max_matmul_cols(spec);
  const model::LoraLimits lora{.max_loras = 1, .max_rank = adapter->max_rank()};

  kernels::cpu::CpuBackend cpu(pool, 9, cols);
  AdapterModel on_cpu = load(b, cpu, lora);
  ASSERT_TRUE(on_cpu.model);
  const auto base_logits = logits_under(on_cpu, ids, -1, 0, spec.n_vocab);
  on_cpu.cache->release(0);
  auto slot = on_cpu.model->attach_lora(*adapter);
  ASSERT_TRUE(slot.ok());
  const auto expected = logits_under(on_cpu, ids, *slot, 0.75f, spec.n_vocab);
  EXPECT_FALSE(same_bits(base_logits, expected)) << "the adapter must change the logits";

  for (int n_host : {0, 1, spec.n_layer / 2}) {
    bool valid = n_host == 0;
    if (n_host > 0) {
      valid = true;
      for (const auto& l : spec.layers)
        valid = valid && ((l.il < n_host) == (l.kv_source < n_host));
    }
    if (!valid) continue;
    SCOPED_TRACE("layers on the host: " + std::to_string(n_host));
    testing_util::EmulatedGpu gpu(pool, 9, cols);
    kernels::cpu::CpuBackend host(pool, 9, cols);
    AdapterModel dev = load(b, gpu, lora, n_host > 0 ? &host : nullptr, n_host);
    ASSERT_TRUE(dev.model);
    auto s = dev.model->attach_lora(*adapter);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(same_bits(logits_under(dev, ids, *s, 0.75f, spec.n_vocab), expected));
    // The base model on the same loaded model: no adapter token, the base's logits.
    dev.cache->release(0);
    EXPECT_TRUE(same_bits(logits_under(dev, ids, -1, 0, spec.n_vocab), base_logits));
  }
}

// Three sequences in every pass — adapter A, adapter B at its own scale, and the base model —
// each give the logits they give alone, bit for bit (the CPU's results depend on a row's own
// inputs only), on the CPU and on the emulated GPU.
TEST_P(LoraLanes, MixedAdaptersInOnePassGiveEachItsSoloLogits) {
  const std::string shape = GetParam();
  const Base b = open_base(shape == "stories260K" ? "llama" : "gemma4", shape);
  ASSERT_TRUE(b.spec);
  const model::Spec& spec = *b.spec;
  const fs::path dir = test_dir();
  write_adapter(*b.file, dir / "a.gguf", {.rank = 4, .seed = 1});
  write_adapter(*b.file, dir / "b.gguf",
                {.rank = 2, .seed = 2, .targets = {"attn_v", "attn_output", "ffn_up"}});
  auto a = model::LoraAdapter::open((dir / "a.gguf").string(), *b.file, spec);
  auto bb = model::LoraAdapter::open((dir / "b.gguf").string(), *b.file, spec);
  ASSERT_TRUE(a.ok() && bb.ok());
  util::ThreadPool pool(2);
  const int64_t cols = model::max_matmul_cols(spec);
  const model::LoraLimits lora{.max_loras = 2, .max_rank = 4};
  for (const bool device : {false, true}) {
    SCOPED_TRACE(device ? "emulated GPU" : "cpu");
    kernels::cpu::CpuBackend cpu(pool, 9, cols);
    testing_util::EmulatedGpu gpu(pool, 9, cols);
    kernels::Backend& ops = device ? static_cast<kernels::Backend&>(gpu) : cpu;
    AdapterModel r = load(b, ops, lora, nullptr, 0, /*n_slots=*/3);
    ASSERT_TRUE(r.model);
    const int sa = *r.model->attach_lora(*a), sb = *r.model->attach_lora(*bb);
    const int adapter_of[3] = {sa, sb, -1};
    const float scale_of[3] = {1.0f, 0.5f, 0.0f};
    const auto ids = testing_util::spread_token_ids(9);
    // Solo: each sequence alone in slot 0, 3 tokens per pass.
    std::vector<std::vector<float>> solo(3);
    for (int s = 0; s < 3; ++s) {
      solo[s].resize(ids.size() * spec.n_vocab);
      ASSERT_TRUE(r.cache->reserve(0, static_cast<int>(ids.size())));
      for (size_t start = 0; start < ids.size(); start += 3) {
        std::vector<int32_t> pos = {int(start), int(start) + 1, int(start) + 2}, slot(3, 0),
                             ad(3, adapter_of[s]);
        std::vector<float> sc(3, scale_of[s]);
        std::vector<uint8_t> out(3, 1);
        model::Batch batch{.tokens = std::span(ids).subspan(start, 3),
                           .pos = pos,
                           .slot = slot,
                           .output = out,
                           .adapter = ad,
                           .adapter_scale = sc};
        ASSERT_TRUE(r.model->forward(batch, *r.cache, solo[s].data() + start * spec.n_vocab).ok());
      }
      r.cache->release(0);
    }
    // Together: the three sequences' tokens interleaved in each pass of 9.
    for (int s = 0; s < 3; ++s) ASSERT_TRUE(r.cache->reserve(s, static_cast<int>(ids.size())));
    std::vector<std::vector<float>> together(3, std::vector<float>(ids.size() * spec.n_vocab));
    std::vector<float> logits(9 * spec.n_vocab);
    for (size_t start = 0; start < ids.size(); start += 3) {
      std::vector<int32_t> tokens, pos, slot, ad;
      std::vector<float> sc;
      for (int i = 0; i < 3; ++i) {
        for (int s = 0; s < 3; ++s) {
          tokens.push_back(ids[start + i]);
          pos.push_back(static_cast<int32_t>(start + i));
          slot.push_back(s);
          ad.push_back(adapter_of[s]);
          sc.push_back(scale_of[s]);
        }
      }
      std::vector<uint8_t> out(9, 1);
      model::Batch batch{.tokens = tokens,
                         .pos = pos,
                         .slot = slot,
                         .output = out,
                         .adapter = ad,
                         .adapter_scale = sc};
      ASSERT_TRUE(r.model->forward(batch, *r.cache, logits.data()).ok());
      for (int i = 0; i < 3; ++i) {
        for (int s = 0; s < 3; ++s) {
          std::memcpy(together[s].data() + (start + i) * spec.n_vocab,
                      logits.data() + (i * 3 + s) * spec.n_vocab, spec.n_vocab * sizeof(float));
        }
      }
    }
    for (int s = 0; s < 3; ++s) EXPECT_TRUE(same_bits(together[s], solo[s])) << "sequence " << s;
    EXPECT_FALSE(same_bits(solo[0], solo[2]));
    EXPECT_FALSE(same_bits(solo[1], solo[2]));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, LoraLanes,
                         ::testing::Values("stories260K", "tiny-e", "tiny-moe", "tiny-dense-keqv"),
                         [](const auto& p) { return testing_util::test_name(p.param); });

}  // namespace
