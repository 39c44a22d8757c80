// The planner against the spec's KV tables (§4.3), the real tensor table, and its fit policy.
#include "plan/planner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include "model/synth.h"
#include "testing/testing.h"
#include "util/units.h"

namespace {

struct Opened {
  std::shared_ptr<gguf::File> file;
  model::Spec spec;
};

// A synthetic model's header with sparse (unwritten) weights: the exact tensor table of the shape.
Opened open_shape(const std::string& arch, const std::string& shape,
                  const std::string& type = "q4_k_m") {
  auto w = model::synth_writer({.arch = arch, .shape = shape, .type = type, .no_weights = true});
  EXPECT_TRUE(w.ok()) << w.error().message();
  const auto path = testing_util::temp_dir() / (shape + ".gguf");
  EXPECT_TRUE(w->write(path.string()).ok());
  auto file = gguf::File::open(path.string());
  EXPECT_TRUE(file.ok());
  Opened o{std::make_shared<gguf::File>(std::move(*file)), {}};
  auto spec = model::spec_from_gguf(*o.file);
  EXPECT_TRUE(spec.ok()) << spec.error().message();
  o.spec = *spec;
  return o;
}

std::vector<plan::Device> cpu_only(uint64_t budget = 1ull << 40) {
  return {{.name = "cpu",
           .kind = plan::DeviceKind::kCpu,
           .total_bytes = budget,
           .budget_bytes = budget,
           .bandwidth = 10e9}};
}

struct KvCase {
  const char* shape;
  int ctx;
  uint64_t spec_f16_bytes;  // spec §4.3, "SWA + sharing" column (exact bytes)
};

// Spec §4.3 worked tables, copied as published. The plan adds the sliding pool it states: per slot,
// a ring of the window, a micro-batch and the block a micro-batch starts in (⌈(W + n_ubatch + 14)
// / 16⌉ = 65 blocks of 16 for W = 512 and a 512-token micro-batch), and the blocks of one cached
// prefix's window (⌈511 / 16⌉ + 1 = 33): 98 blocks, 1568 cells, i.e. 1056 cells beyond W per
// KV-owning sliding layer.
TEST(PlannerKv, GemmaKvBytesEqualTheSpecTablesPlusTheStatedRingSlack) {
  const KvCase cases[] = {
      {"e2b", 4096, 31457280}, {"e2b", 32768, 207618048}, {"e2b", 131072, 811597824},
      {"e4b", 4096, 88080384}, {"e4b", 32768, 557842432}, {"e4b", 131072, 2168455168},
  };
  // Per-token bytes of one sliding layer at f16 (§4.1): E2B 1024, E4B 2048; owning sliding layers
  // 12 / 20.
  const std::map<std::string, std::pair<uint64_t, uint64_t>> sliding = {{"e2b", {12, 1024}},
                                                                        {"e4b", {20, 2048}}};
  for (const char* shape : {"e2b", "e4b"}) {
    const Opened m = open_shape("gemma4", shape);
    for (const auto& c : cases) {
      if (std::string(c.shape) != shape) continue;
      // f16 → q8_0 / q4_0: every head dim is a multiple of 32, and 32 values take 64, 34 or 18
      // bytes.
      for (auto [type, per32] :
           {std::pair{tensor::DType::kF16, 64}, std::pair{tensor::DType::kQ8_0, 34},
            std::pair{tensor::DType::kQ4_0, 18}}) {
        SCOPED_TRACE(fmt::format("{} ctx {} {}", shape, c.ctx, gguf::tensor_type_name(type)));
        plan::Request r{
            .n_ctx = c.ctx, .k_type = type, .v_type = type, .n_slots = 1, .n_ubatch = 512};
        auto p = plan::make_plan({*m.file, m.spec, cpu_only()}, r);
        ASSERT_TRUE(p.ok()) << p.error().message();
        const auto [n_sliding, per_token] = sliding.at(shape);
        const uint64_t slack_f16 = n_sliding * 1056 * per_token;
        const uint64_t expected = (c.spec_f16_bytes + slack_f16) / 64 * per32;
        EXPECT_EQ(p->bytes_of(plan::ItemKind::kKvCache), expected);
      }
    }
  }
}

TEST(PlannerKv, SlotsMultiplyAndSharedLayersHoldNothing) {
  const Opened m = open_shape("gemma4", "e2b");
  plan::Request one{.n_ctx = 4096}, four{.n_ctx = 4096, .n_slots = 4};
  auto p1 = plan::make_plan({*m.file, m.spec, cpu_only()}, one);
  auto p4 = plan::make_plan({*m.file, m.spec, cpu_only()}, four);
  ASSERT_TRUE(p1.ok() && p4.ok());
  EXPECT_EQ(p4->bytes_of(plan::ItemKind::kKvCache), 4 * p1->bytes_of(plan::ItemKind::kKvCache));
  // Naive accounting (every layer, every position) would be 168 MiB at 4K (§4.3); we plan 42.4:
  // the full layers' 24 MiB and the sliding pool above.
  EXPECT_LT(p1->bytes_of(plan::ItemKind::kKvCache), 43u << 20);
}

TEST(Planner, WeightsAreTheSumOfTheRealTensorTable) {
  auto file = gguf::File::open((testing_util::shared_dir() / "models/stories260K.gguf").string());
  ASSERT_TRUE(file.ok());
  auto spec = model::spec_from_gguf(*file);
  ASSERT_TRUE(spec.ok());
  auto p = plan::make_plan({*file, *spec, cpu_only()}, {.n_ctx = 512});
  ASSERT_TRUE(p.ok());
  uint64_t tensors = 0;
  for (const auto& t : file->tensors()) tensors += t.n_bytes;
  EXPECT_EQ(p->bytes_of(plan::ItemKind::kWeights), tensors);
  EXPECT_EQ(tensors, 292800u * 4);
  // stories260K, f16 KV, context 512: 5 layers × 512 positions × (32 + 32 values) × 2 bytes.
  EXPECT_EQ(p->bytes_of(plan::ItemKind::kKvCache), 5u * 512 * 64 * 2);
  EXPECT_TRUE(p->fits);
}

// Gathered = looked up by rows (never streamed whole, so never hinted for huge pages): Gemma 4's
// per-layer table, and a token embedding only where a separate output matrix exists (spec §2.2).
TEST(PlannerInventory, OnlyTablesLookedUpByRowsAreGathered) {
  const Opened gemma = open_shape("gemma4", "e2b");
  int gathered = 0;
  for (const auto& w : plan::inventory(*gemma.file, gemma.spec).weights) {
    EXPECT_EQ(w.gathered, w.name == "per_layer_token_embd.weight") << w.name;
    gathered += w.gathered;
    // The tied embedding is E2B's output matrix: read whole for every token's logits.
    if (w.name == "token_embd.weight") {
      EXPECT_EQ(w.bytes_per_token, w.bytes);
    }
  }
  EXPECT_EQ(gathered, 1);
  const Opened llama = open_shape("llama", "tiny", "f32");
  gathered = 0;
  for (const auto& w : plan::inventory(*llama.file, llama.spec).weights) {
    EXPECT_EQ(w.gathered, w.name == "token_embd.weight") << w.name;
    gathered += w.gathered;
  }
  EXPECT_EQ(gathered, 1);
}

// Speculative decoding verifies each drafted token with a row of logits: E2B's vocabulary of
// 262144 f32 logits, and the selection a GPU hands back, per row and slot.
TEST(Planner, DraftsArePricedAsRowsOfLogitsPerSlot) {
  const Opened m = open_shape("gemma4", "e2b");
  const uint64_t row = 262144 * 4 + 64 * (4 + 4);  // f32 logits; 64 ids and logits
  auto none = plan::make_plan({*m.file, m.spec, cpu_only()}, {.n_ctx = 4096, .n_slots = 2});
  auto drafted =
      plan::make_plan({*m.file, m.spec, cpu_only()}, {.n_ctx = 4096, .n_slots = 2, .n_draft = 5});
  ASSERT_TRUE(none.ok() && drafted.ok());
  EXPECT_EQ(none->bytes_of(plan::ItemKind::kLogits), 2 * row);
  EXPECT_EQ(drafted->bytes_of(plan::ItemKind::kLogits), 2 * (1 + 5) * row);
  // A draft and the token before it are one micro-batch at most.
  auto too_long =
      plan::make_plan({*m.file, m.spec, cpu_only()}, {.n_ctx = 4096, .n_ubatch = 8, .n_draft = 8});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message().find("--draft 8"), std::string::npos)
      << too_long.error().message();
}

TEST(PlannerFit, RefusesWithAlternativesFastestFirstAndFitAppliesTheBest) {
  const Opened m = open_shape("gemma4", "e2b");
  plan::Request r{.n_ctx = 131072};
  auto roomy = plan::make_plan({*m.file, m.spec, cpu_only()}, r);
  ASSERT_TRUE(roomy.ok());
  // Room for 450 MiB of KV: 128K at q8_0 (414 MiB) fits, at f16 (780 MiB) it does not.
  const uint64_t budget =
      roomy->bytes_on(0) - roomy->bytes_of(plan::ItemKind::kKvCache) + (450ull << 20);
  auto p = plan::plan_with_fit({*m.file, m.spec, cpu_only(budget)}, r, /*fit=*/false);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->fits);
  ASSERT_FALSE(p->alternatives.empty());
  for (size_t i = 1; i < p->alternatives.size(); ++i) {
    EXPECT_GE(p->alternatives[i - 1].tokens_per_second, p->alternatives[i].tokens_per_second);
  }
  bool has_ctx = false, has_q8 = false;
  for (const auto& a : p->alternatives) {
    has_ctx |= a.flags.find("--ctx") != std::string::npos;
    has_q8 |= a.flags.find("q8_0") != std::string::npos;
  }
  EXPECT_TRUE(has_ctx);
  EXPECT_TRUE(has_q8);
  EXPECT_NE(p->refusal().find("--fit"), std::string::npos);

  auto fitted = plan::plan_with_fit({*m.file, m.spec, cpu_only(budget)}, r, /*fit=*/true);
  ASSERT_TRUE(fitted.ok());
  EXPECT_TRUE(fitted->fits);
  EXPECT_FALSE(fitted->applied.empty());
  EXPECT_LE(fitted->bytes_on(0), budget);
}

TEST(PlannerFit, PartialOffloadIsPlannedAndCostsSpeed) {
  const Opened m = open_shape("gemma4", "e2b");
  std::vector<plan::Device> devices = cpu_only();
  devices.push_back({.name = "gpu",
                     .kind = plan::DeviceKind::kGpu,
                     .total_bytes = 2ull << 30,
                     .budget_bytes = 2ull << 30,
                     .bandwidth = 300e9,
                     .link_bandwidth = 25e9});
  auto p = plan::plan_with_fit({*m.file, m.spec, devices}, {.n_ctx = 4096}, false);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->fits);  // 3.2 GiB of weights on a 2 GiB GPU
  // Keeping the gathered PLE table (1.8 GiB) on the host is the fastest change --fit can make
  // (a re-quantized file may rank higher, but needs a new file).
  const plan::Alternative* first_automatic = nullptr;
  for (const auto& a : p->alternatives) {
    if (a.automatic && !first_automatic) first_automatic = &a;
  }
  ASSERT_NE(first_automatic, nullptr);
  EXPECT_EQ(first_automatic->flags, "--ple-on-host");
  auto offload = plan::make_plan({*m.file, m.spec, devices}, {.n_ctx = 4096, .ple_on_host = true});
  auto partial = plan::make_plan({*m.file, m.spec, devices},
                                 {.n_ctx = 4096, .n_cpu_layers = 10, .ple_on_host = true});
  ASSERT_TRUE(offload.ok() && partial.ok());
  EXPECT_LT(partial->prediction.tokens_per_second, offload->prediction.tokens_per_second);
  EXPECT_GT(partial->bytes_on(0), offload->bytes_on(0));
}

// E2B's KV-shared layers 15..34 read layers 13 and 14: a split between them is refused with the
// nearest splits that work, and --fit never proposes one. What crosses per token is priced by its
// bytes: the residual stream there and back, and the per-layer inputs (35 × 256 floats) once.
TEST(PlannerFit, PartialOffloadKeepsKvSharingLayersTogether) {
  const Opened m = open_shape("gemma4", "e2b");
  std::vector<plan::Device> devices = cpu_only();
  devices.push_back({.name = "gpu",
                     .kind = plan::DeviceKind::kGpu,
                     .total_bytes = 8ull << 30,
                     .budget_bytes = 8ull << 30,
                     .bandwidth = 300e9,
                     .link_bandwidth = 25e9});
  for (int n : {14, 20, 34}) {
    auto p = plan::make_plan({*m.file, m.spec, devices}, {.n_ctx = 4096, .n_cpu_layers = n});
    ASSERT_FALSE(p.ok()) << n;
    EXPECT_NE(p.error().message().find("use --cpu-layers 13 or 35"), std::string::npos)
        << p.error().message();
  }
  auto ok = plan::make_plan({*m.file, m.spec, devices}, {.n_ctx = 4096, .n_cpu_layers = 13});
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  const double x = 1536 * 4.0, ple = 35 * 256 * 4.0;
  EXPECT_NEAR(ok->prediction.transfer_seconds, 2 * (x / 25e9 + 10e-6) + ple / 25e9 + 10e-6, 1e-9);
}

// A present GPU this build cannot run on (no GPU backend) takes no bytes, even when it would be
// the faster place and the CPU's budget is too small; the plan names it once and keeps the
// alternatives to CPU-side changes.
TEST(Planner, APresentGpuThisBuildCannotRunOnIsNamedOnceAndTakesNothing) {
  const Opened m = open_shape("gemma4", "e2b");
  std::vector<plan::Device> devices = cpu_only(2ull << 30);
  devices.push_back({.name = "cuda:0 NVIDIA Test",
                     .kind = plan::DeviceKind::kGpu,
                     .total_bytes = 80ull << 30,
                     .budget_bytes = 70ull << 30,
                     .bandwidth = 3e12,
                     .link_bandwidth = 25e9,
                     .placeable = false,
                     .unusable_reason = "this build runs on the CPU: it has no GPU backend yet"});
  auto p = plan::plan_with_fit({*m.file, m.spec, devices}, {.n_ctx = 4096}, false);
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ(p->devices.size(), 1u);
  EXPECT_EQ(p->devices[0].kind, plan::DeviceKind::kCpu);
  for (const auto& item : p->items) EXPECT_EQ(item.device, 0) << item.name;
  ASSERT_EQ(p->unused_devices.size(), 1u);
  EXPECT_EQ(p->unused_devices[0].name, "cuda:0 NVIDIA Test");
  ASSERT_EQ(p->notes.size(), 1u);
  EXPECT_EQ(p->notes[0].rfind("GPU present (cuda:0 NVIDIA Test) but this build runs on the CPU", 0),
            0u)
      << p->notes[0];
  EXPECT_FALSE(p->fits);  // 3.3 GiB on a 2 GiB CPU budget: the GPU's room does not count
  for (const auto& a : p->alternatives) {
    EXPECT_EQ(a.flags.find("--cpu-layers"), std::string::npos) << a.flags;
    EXPECT_EQ(a.flags.find("--ple-on-host"), std::string::npos) << a.flags;
  }
  // With a placeable GPU of the same size the same request fits there.
  devices[1].placeable = true;
  auto on_gpu = plan::make_plan({*m.file, m.spec, devices}, {.n_ctx = 4096});
  ASSERT_TRUE(on_gpu.ok());
  EXPECT_TRUE(on_gpu->fits);
  EXPECT_TRUE(on_gpu->notes.empty());
  EXPECT_GT(on_gpu->bytes_on(1), 0u);
}

// Gemma 4 31B at a 128K context in 16 GiB of RAM: no single change fits (its Q4_K_M weights alone
// take more), but a re-quantized file with a quantized KV cache does. The search must find the
// fastest such combination: checked against a brute-force grid written here, and against a fresh
// file of the chosen weight type, planned as given.
TEST(PlannerFit, Gemma31BAt128KSearchesCombinationsFastestFirst) {
  const Opened m = open_shape("gemma4", "31b");
  const plan::Request r{.n_ctx = 131072};
  const auto devices = cpu_only(16ull << 30);
  const auto start = std::chrono::steady_clock::now();
  auto p = plan::plan_with_fit({*m.file, m.spec, devices}, r, /*fit=*/false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_FALSE(p->fits);
  ASSERT_FALSE(p->alternatives.empty()) << p->refusal();
  for (size_t i = 1; i < p->alternatives.size(); ++i) {
    EXPECT_GE(p->alternatives[i - 1].tokens_per_second * 1.01,
              p->alternatives[i].tokens_per_second);
  }
  const plan::Alternative& best = p->alternatives[0];
  std::printf("31B/128K/16 GiB: %zu alternatives in %.3f s; best: %s [%s] %.2f tok/s\n",
              p->alternatives.size(), seconds, best.change.c_str(), best.flags.c_str(),
              best.tokens_per_second);

  // Brute force over a grid of its own: weight types, K and V types independently, contexts.
  double fastest = 0;
  std::string fastest_what;
  const std::optional<gguf::TensorType> weights[] = {std::nullopt,
                                                     gguf::TensorType::kQ6_K,
                                                     gguf::TensorType::kQ5_K,
                                                     gguf::TensorType::kQ4_K,
                                                     gguf::TensorType::kQ3_K,
                                                     gguf::TensorType::kQ2_K};
  const tensor::DType kv[] = {tensor::DType::kF16, tensor::DType::kQ8_0, tensor::DType::kQ4_0};
  for (const auto& w : weights) {
    for (auto k : kv) {
      for (auto v : kv) {
        for (int ctx : {131072, 65536, 32768, 8192, 4096}) {
          plan::Request q{.n_ctx = ctx, .k_type = k, .v_type = v};
          q.requantized = w;
          auto b = plan::make_plan({*m.file, m.spec, devices}, q);
          ASSERT_TRUE(b.ok());
          if (b->fits && b->prediction.tokens_per_second > fastest) {
            fastest = b->prediction.tokens_per_second;
            fastest_what =
                fmt::format("{} K {} V {} ctx {}", w ? gguf::tensor_type_name(*w) : "as is",
                            gguf::tensor_type_name(k), gguf::tensor_type_name(v), ctx);
          }
        }
      }
    }
  }
  ASSERT_GT(fastest, 0);
  EXPECT_GE(best.tokens_per_second * 1.01, fastest) << fastest_what;
  // Among ties it keeps the context asked for (the brute force shows one exists).
  EXPECT_EQ(best.request.n_ctx, 131072) << best.change;
  EXPECT_FALSE(best.automatic);
  ASSERT_TRUE(best.request.requantized.has_value());

  // Planned again as given, and from a fresh file of that weight type, it fits, and the fresh
  // file's weights are the bytes the search priced.
  auto again = plan::make_plan({*m.file, m.spec, devices}, best.request);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->fits);
  const std::string type = gguf::tensor_type_name(*best.request.requantized).data();
  const Opened fresh = open_shape("gemma4", "31b", type);
  plan::Request as_given = best.request;
  as_given.requantized.reset();
  auto fresh_plan = plan::make_plan({*fresh.file, fresh.spec, devices}, as_given);
  ASSERT_TRUE(fresh_plan.ok());
  EXPECT_TRUE(fresh_plan->fits) << fresh_plan->problems[0];
  EXPECT_EQ(fresh_plan->bytes_of(plan::ItemKind::kWeights),
            again->bytes_of(plan::ItemKind::kWeights));
  std::printf("planned: %s on the CPU (weights %s)\n",
              util::format_bytes(fresh_plan->bytes_on(0)).c_str(),
              util::format_bytes(fresh_plan->bytes_of(plan::ItemKind::kWeights)).c_str());
  EXPECT_NE(best.flags.find("--kv-type"), std::string::npos) << best.flags;
  EXPECT_NE(best.flags.find("-m MODEL-" + type), std::string::npos) << best.flags;
}

// When even the smallest weights exceed the budget, the refusal says so with their size: the
// tensor table of a 31B file written at Q2_K (the smallest type the search prices).
TEST(PlannerFit, WhenNothingFitsTheWeightsAloneAreNamedWithTheirSize) {
  const Opened m = open_shape("gemma4", "31b");
  const Opened q2 = open_shape("gemma4", "31b", "q2_k");
  uint64_t q2_weights = 0;
  for (const auto& t : q2.file->tensors()) q2_weights += t.n_bytes;
  ASSERT_GT(q2_weights, 8ull << 30);
  auto p = plan::plan_with_fit({*m.file, m.spec, cpu_only(8ull << 30)}, {.n_ctx = 131072}, true);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->fits);
  EXPECT_TRUE(p->alternatives.empty());
  const std::string expected = fmt::format(
      "the weights alone at the smallest quantization searched (Q2_K, {}) exceed the "
      "CPU budget of {}",
      util::format_bytes(q2_weights), util::format_bytes(8ull << 30));
  EXPECT_EQ(p->nothing_fits, expected);
  EXPECT_NE(p->refusal().find(expected), std::string::npos) << p->refusal();
}

// When the weights fit but nothing else does, the least memory the search reaches is named part by
// part on the device it overflows.
TEST(PlannerFit, WhenOnlyTheRestOverflowsTheLeastMemoryIsBrokenDown) {
  const Opened m = open_shape("gemma4", "e2b");
  auto small =
      plan::make_plan({*m.file, m.spec, cpu_only()}, {.n_ctx = 256,
                                                      .k_type = tensor::DType::kQ4_0,
                                                      .v_type = tensor::DType::kQ4_0,
                                                      .requantized = gguf::TensorType::kQ2_K});
  ASSERT_TRUE(small.ok());
  const uint64_t budget = small->bytes_of(plan::ItemKind::kWeights) + (1u << 20);
  auto p = plan::plan_with_fit({*m.file, m.spec, cpu_only(budget)}, {.n_ctx = 4096}, false);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->alternatives.empty());
  EXPECT_NE(p->nothing_fits.find("even the least memory searched"), std::string::npos)
      << p->nothing_fits;
  EXPECT_NE(p->nothing_fits.find("weights " +
                                 util::format_bytes(small->bytes_of(plan::ItemKind::kWeights))),
            std::string::npos)
      << p->nothing_fits;
}

}  // namespace
