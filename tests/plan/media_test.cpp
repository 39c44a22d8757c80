// The planner's pricing of a projector (plan/media.cpp): encoder weights from the real tensor
// table on the device that runs each encoder, their activations, the host buffers, a micro-batch
// that holds a whole image, and an image's cost in context and KV cache (worked from spec §7.1).
#include "plan/media.h"

#include <gtest/gtest.h>

#include "mm/encoders.h"
#include "mm/mm_testing.h"
#include "model/synth.h"

namespace {

using namespace mm_testing;

struct TextModel {
  std::shared_ptr<gguf::File> file;
  model::Spec spec;
};

TextModel open_text(const std::string& shape) {
  auto w =
      model::synth_writer({.arch = "gemma4", .shape = shape, .type = "f16", .no_weights = true});
  EXPECT_TRUE(w.ok()) << w.error().message();
  const auto path = testing_util::temp_dir() / (shape + ".gguf");
  EXPECT_TRUE(w->write(path.string()).ok());
  auto file = gguf::File::open(path.string());
  EXPECT_TRUE(file.ok());
  TextModel o{std::make_shared<gguf::File>(std::move(*file)), {}};
  auto spec = model::spec_from_gguf(*o.file);
  EXPECT_TRUE(spec.ok());
  o.spec = *spec;
  return o;
}

std::vector<plan::Device> devices(bool gpu) {
  std::vector<plan::Device> d = {{.name = "cpu",
                                  .kind = plan::DeviceKind::kCpu,
                                  .total_bytes = 1ull << 40,
                                  .budget_bytes = 1ull << 40,
                                  .bandwidth = 10e9}};
  if (gpu) {
    d.push_back({.name = "gpu",
                 .kind = plan::DeviceKind::kGpu,
                 .total_bytes = 1ull << 40,
                 .budget_bytes = 1ull << 40,
                 .bandwidth = 1e12,
                 .link_bandwidth = 25e9,
                 .simulated = true,
                 .gpu_index = 0});
  }
  return d;
}

// The bytes of a tower's tensors but the one-value ones (clip bounds, scales: read into the
// encoder's parameters, not held).
uint64_t tower_bytes(const gguf::File& f, std::string_view a, std::string_view b) {
  uint64_t bytes = 0;
  for (const auto& t : f.tensors()) {
    bytes += (t.name.starts_with(a) || t.name.starts_with(b)) && t.n_elements > 1 ? t.n_bytes : 0;
  }
  return bytes;
}

const plan::Item* find(const plan::Plan& p, std::string_view name, plan::ItemKind kind) {
  for (const auto& i : p.items) {
    if (i.name == name && i.kind == kind) return &i;
  }
  return nullptr;
}

TEST(PlanMedia, PricesEachEncoderWhereItRuns) {
  const TextModel text = open_text("tiny-e");
  auto proj_file = gguf::File::open(tiny_projector().string());
  ASSERT_TRUE(proj_file.ok());
  auto proj = mm::projector_from_gguf(*proj_file);
  ASSERT_TRUE(proj.ok());
  for (bool gpu : {false, true}) {
    plan::PlanInput in{*text.file, text.spec, devices(gpu), &*proj_file, &*proj};
    plan::Request r{.n_ctx = 1024, .n_ubatch = 64, .image_tokens = 280, .audio_seconds = 30};
    auto p = plan::make_plan(in, r);
    ASSERT_TRUE(p.ok()) << p.error().message();
    const int compute = gpu ? 1 : 0;
    const auto* vision_w = find(*p, "vision encoder", plan::ItemKind::kWeights);
    const auto* audio_w = find(*p, "audio encoder", plan::ItemKind::kWeights);
    ASSERT_NE(vision_w, nullptr);
    ASSERT_NE(audio_w, nullptr);
    // The sums of the real tensors of each tower (the embedder counts with its encoder).
    EXPECT_EQ(vision_w->bytes, tower_bytes(*proj_file, "v.", "mm.input_projection"));
    EXPECT_EQ(audio_w->bytes, tower_bytes(*proj_file, "a.", "mm.a."));
    EXPECT_EQ(vision_w->device, compute);
    EXPECT_EQ(audio_w->device, 0);  // its small ops run in host memory
    const auto* vision_a = find(*p, "vision encoder", plan::ItemKind::kActivations);
    ASSERT_NE(vision_a, nullptr);
    EXPECT_EQ(vision_a->bytes, mm::VisionEncoder::workspace_bytes(*proj->vision, 128, 280));
    EXPECT_EQ(vision_a->device, compute);
    ASSERT_NE(find(*p, "media preparation", plan::ItemKind::kHost), nullptr);
    // The embedding rows: one micro-batch's and the largest medium's, text-model wide.
    EXPECT_EQ(
        find(*p, "media embeddings", plan::ItemKind::kHost)->bytes,
        uint64_t(p->request.n_ubatch + std::max(p->media.image_tokens, p->media.audio_tokens)) *
            128 * 4);
  }
}

// An image is evaluated in one micro-batch (its tokens may attend each other both ways), beside one
// decoding token per other slot: 1120 + 3 for four slots.
TEST(PlanMedia, RaisesTheMicroBatchToHoldAWholeImage) {
  const TextModel text = open_text("tiny-e");
  auto proj_file = gguf::File::open(tiny_projector().string());
  auto proj = mm::projector_from_gguf(*proj_file);
  ASSERT_TRUE(proj.ok());
  plan::PlanInput in{*text.file, text.spec, devices(false), &*proj_file, &*proj};
  plan::Request r{.n_ctx = 2048, .n_slots = 4, .n_ubatch = 512, .image_tokens = 1120};
  auto p = plan::make_plan(in, r);
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->request.n_ubatch, 1123);
  ASSERT_FALSE(p->notes.empty());
  EXPECT_NE(p->notes.back().find("1123"), std::string::npos) << p->notes.back();
  // A context too small for one image is refused.
  r.n_ctx = 1024;
  auto small = plan::make_plan(in, r);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.error().message().find("--ctx"), std::string::npos);
}

// tiny-e (spec §7.1): KV-owning layers 0–4 are S, S, F, S, F; sliding K/V rows 2 heads × 32 = 64
// values, full 2 × 64 = 128; f16 KV. 280 image tokens: sliding layers hold at most W = 8 of them.
//   sliding 3 × 8 × (128 + 128) B = 6144; full 2 × 280 × (256 + 256) B = 286720 → 292864 B.
TEST(PlanMedia, AnImageCostsItsTokensOfContextAndKv) {
  const TextModel text = open_text("tiny-e");
  auto proj_file = gguf::File::open(tiny_projector().string());
  auto proj = mm::projector_from_gguf(*proj_file);
  ASSERT_TRUE(proj.ok());
  plan::PlanInput in{*text.file, text.spec, devices(false), &*proj_file, &*proj};
  auto p = plan::make_plan(in, {.n_ctx = 256 * 4, .n_ubatch = 512, .image_tokens = 280});
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->media.image_tokens, 280);
  EXPECT_EQ(p->media.image_kv_bytes, 292864u);
  EXPECT_EQ(p->media.audio_tokens, 0);
}

TEST(PlanMedia, RefusesAProjectorForAnotherModel) {
  const TextModel text = open_text("tiny-e");
  auto proj_file = gguf::File::open(tiny_projector("--text-embd 64").string());
  auto proj = mm::projector_from_gguf(*proj_file);
  ASSERT_TRUE(proj.ok());
  plan::PlanInput in{*text.file, text.spec, devices(false), &*proj_file, &*proj};
  auto p = plan::make_plan(in, {.n_ctx = 256, .image_tokens = 280});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message().find("64 wide"), std::string::npos) << p.error().message();
}

}  // namespace
