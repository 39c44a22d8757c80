// Media through the whole engine, against independent truth: the text logits of every position of
// a prompt holding an image or an audio clip — the projector loaded as planned, the scheduler
// encoding each medium when its turn comes, the forward pass taking the embeddings in place of
// the placeholders' — equal the float64 reference on the same tiny random-weight models
// (headroom synth's Gemma 4 shapes, synth_mmproj.py's projector): reference_mm.py's encoder
// output placed by reference_model.py --media, both written from Hugging Face's Gemma 4, not
// from headroom's C++. Then the scheduler's side: an image is never split across micro-batches,
// one larger than planned is refused, an image's first token sees its last, and the prefix cache
// tells two images apart.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <memory>

#include "engine/engine.h"
#include "engine/media_prompt.h"
#include "engine/scheduler.h"
#include "mm/image_preprocess.h"
#include "mm_testing.h"
#include "testing/emulated_gpu.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace mm_testing;

// f32 engine and f32 encoders against the f64 references: the encoders agree to ~1e-6 relative
// (vision_test, audio_test) and the text model to ~5e-6 (gemma4_oracle_test); measured here the
// worst is ~1e-5. 1e-4 leaves room, while scaling the embeddings by √H, reading the placeholder's
// per-layer row instead of the pad token's, or attending causally inside an image moves logits by
// far more (the causal reference is checked to differ below).
constexpr double kTolerance = 1e-4;

// A directory of this test's own (testing_util::temp_dir() empties its directory on every call,
// and the cached references call it when they compute).
fs::path scratch_dir() {
  return testing_util::test_dir("media");
}

fs::path synth_text_model(const std::string& shape, const fs::path& dir = scratch_dir()) {
  const fs::path path = dir / (shape + ".gguf");
  std::string out, err;
  const std::string command = testing_util::headroom_binary().string() +
                              " synth --arch gemma4 --shape " + shape + " -o " + path.string();
  EXPECT_EQ(testing_util::run_command(command, &out, &err), 0) << command << "\n" << out << err;
  return path;
}

struct Loaded {
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
};

// The tiny model with the tiny projector: images of up to 70 tokens, clips of up to 2 s; an f32
// KV cache (the reference keeps K/V unrounded). The micro-batch asked for is 16: the plan raises
// it to hold a whole image.
Loaded load(const fs::path& model, bool prefix_cache = false, int slots = 1, bool gpu = false) {
  engine::EngineOptions o{.model_path = model.string(),
                          .mmproj_path = tiny_projector("--clamp").string(),
                          .request = {.n_ctx = 256,
                                      .k_type = tensor::DType::kF32,
                                      .v_type = tensor::DType::kF32,
                                      .n_slots = slots,
                                      .n_ubatch = 16,
                                      .prefix_cache = prefix_cache,
                                      .logits_all_positions = true,
                                      .image_tokens = 70,
                                      .audio_seconds = 2}};
  if (gpu) {  // an --assume-gpu GPU, run on the emulator (device memory, the CPU's arithmetic)
    o.devices.assume_gpu = "1G@100";
    o.gpu_backend = [](int) -> util::Result<std::unique_ptr<kernels::Backend>> {
      return std::unique_ptr<kernels::Backend>(
          std::make_unique<testing_util::EmulatedGpu>(2, 64, 4096));
    };
  }
  auto e = engine::Engine::load(o);
  EXPECT_TRUE(e.ok()) << (e ? "" : e.error().message());
  if (!e) return {};
  auto t = tokenizer::Tokenizer::from_gguf((*e)->file());
  EXPECT_TRUE(t.ok());
  return {std::move(*e), std::make_unique<tokenizer::Tokenizer>(std::move(*t))};
}

std::shared_ptr<const mm::Media> prepare(const engine::Engine& e, mm::MediaKind kind,
                                         const std::string& file) {
  const auto bytes = testing_util::read_file(data(file));
  auto m = engine::prepare_media(e, kind, bytes);
  EXPECT_TRUE(m.ok()) << (m ? "" : m.error().message());
  return m ? *m : nullptr;
}

// BOS, `before` text tokens, one placeholder per medium, `after` more text tokens — widened.
engine::Request media_prompt(const Loaded& l, std::vector<std::shared_ptr<const mm::Media>> media,
                             int before = 5, int after = 5) {
  const mm::MediaTokens markers = engine::media_tokens(*l.tokenizer);
  std::vector<int32_t> ids = {2};
  const auto text = testing_util::spread_token_ids(before + after);
  ids.insert(ids.end(), text.begin(), text.begin() + before);
  for (const auto& m : media)
    ids.push_back(m->kind == mm::MediaKind::kImage ? markers.image : markers.audio);
  ids.insert(ids.end(), text.begin() + before, text.end());
  engine::Request r;
  auto status = engine::attach_media(r, ids, media, *l.engine, *l.tokenizer);
  EXPECT_TRUE(status.ok()) << status.error().message();
  return r;
}

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

// reference_model.py's logits [n][V] with each span's medium the reference encoder's output.
std::vector<float> reference_logits(const fs::path& model, const engine::Request& r,
                                    const std::string& encoder_args, bool bidirectional) {
  const fs::path dump = cached_python("reference_mm.py", encoder_args);
  std::string args = fmt::format("{} --ids {}", model.string(), join(r.prompt));
  for (const auto& span : r.media) {
    args += fmt::format(" --media {}:{}:{}", dump.string(), span.first,
                        mm::media_kind_name(span.media->kind));
  }
  if (bidirectional) args += " --bidirectional-vision";
  const fs::path out = scratch_dir() / "reference.f32";
  if (!run_python("reference_model.py", args + " -o " + out.string())) return {};
  return testing_util::read_f32(out);
}

struct EndToEndCase {
  std::string name;
  std::string shape;  // headroom synth's tiny Gemma 4 shape
  mm::MediaKind kind;
};
void PrintTo(const EndToEndCase& c, std::ostream* os) {
  *os << c.name;
}

class MediaEndToEnd : public ::testing::TestWithParam<EndToEndCase> {};

TEST_P(MediaEndToEnd, LogitsMatchReference) {
  const EndToEndCase& c = GetParam();
  const fs::path model = synth_text_model(c.shape);
  Loaded l = load(model);
  ASSERT_TRUE(l.engine);
  const bool image = c.kind == mm::MediaKind::kImage;
  const std::string file = image ? "rose.jpg" : "speech.wav";
  auto medium = prepare(*l.engine, c.kind, file);
  ASSERT_TRUE(medium);
  const engine::Request r = media_prompt(l, {medium});
  ASSERT_EQ(r.media.size(), 1u);
  const mm::MediaSpan& span = r.media[0];
  const bool both_ways = mm::sees_images_both_ways(l.engine->spec()) && image;
  EXPECT_EQ(span.both_ways, both_ways);

  auto logits = engine::prompt_logits(*l.engine, r.prompt, r.media);
  ASSERT_TRUE(logits.ok()) << logits.error().message();
  const std::string proj = tiny_projector("--clamp").string();
  const std::string encoder_args =
      image ? fmt::format("image {} {} --image-tokens 70", proj, data(file).string())
            : fmt::format("audio {} {}", proj, data(file).string());
  const auto expected = reference_logits(model, r, encoder_args, both_ways);
  ASSERT_EQ(expected.size(), logits->size());
  const int n_vocab = l.engine->spec().n_vocab;
  const Difference d = compare(expected, *logits);
  std::printf("[ media ] %-26s %d tokens (%s of %d at %d): max|dlogit| %.3g of %.3g, rel %.2g\n",
              c.name.c_str(), static_cast<int>(r.prompt.size()), file.c_str(), span.n_tokens,
              span.first, d.max_diff, d.max_abs, d.relative());
  EXPECT_LE(d.relative(), kTolerance) << "at position " << d.at / n_vocab;

  if (both_ways) {
    // The test can fail: attending causally inside the image gives other logits at its tokens.
    const auto causal = reference_logits(model, r, encoder_args, false);
    const size_t image_rows = static_cast<size_t>(span.first) * n_vocab;
    const Difference cd = compare(
        std::span(expected).subspan(image_rows, static_cast<size_t>(span.n_tokens) * n_vocab),
        std::span(causal).subspan(image_rows, static_cast<size_t>(span.n_tokens) * n_vocab));
    EXPECT_GT(cd.relative(), 100 * kTolerance) << "seeing the image both ways changes nothing";
  }
}

// tiny-e has per-layer embeddings (E2B-like: images causal); tiny-moe and tiny-dense-keqv have
// none (26B-A4B- and 31B-like: an image's tokens see each other both ways on sliding layers).
INSTANTIATE_TEST_SUITE_P(
    TinyModels, MediaEndToEnd,
    ::testing::Values(EndToEndCase{"tiny_e_image", "tiny-e", mm::MediaKind::kImage},
                      EndToEndCase{"tiny_moe_image_both_ways", "tiny-moe", mm::MediaKind::kImage},
                      EndToEndCase{"tiny_e_audio", "tiny-e", mm::MediaKind::kAudio},
                      EndToEndCase{"tiny_dense_keqv_audio", "tiny-dense-keqv",
                                   mm::MediaKind::kAudio}),
    [](const auto& p) { return p.param.name; });

// On a device the vision encoder runs there with its weights placed, the embeddings and the image
// groups go up with the step, the audio encoder runs on a CPU backend of its own: the logits are
// the host's, and every allocation is the plan's.
TEST(MediaOnADevice, LogitsMatchTheHostAndAllocationsThePlan) {
  const fs::path model = synth_text_model("tiny-moe");
  Loaded cpu = load(model), gpu = load(model, false, 1, /*gpu=*/true);
  ASSERT_TRUE(cpu.engine && gpu.engine);
  ASSERT_TRUE(gpu.engine->plan().uses_gpu());
  auto image = prepare(*gpu.engine, mm::MediaKind::kImage, "rose.jpg");
  auto clip = prepare(*gpu.engine, mm::MediaKind::kAudio, "speech.wav");
  ASSERT_TRUE(image && clip);
  const engine::Request r = media_prompt(gpu, {image, clip});
  auto on_cpu = engine::prompt_logits(*cpu.engine, r.prompt, r.media);
  auto on_gpu = engine::prompt_logits(*gpu.engine, r.prompt, r.media);
  ASSERT_TRUE(on_cpu.ok() && on_gpu.ok());
  const Difference d = compare(*on_cpu, *on_gpu);
  EXPECT_LE(d.relative(), 1e-5) << d.max_diff;
  // The vision encoder's weights in the device's memory are the plan's; its activations and the
  // audio encoder's (with its CPU backend's scratch) are in the activations, as planned.
  uint64_t vision_weights = 0;
  for (const auto& item : gpu.engine->plan().items) {
    if (item.name == "vision encoder" && item.kind == plan::ItemKind::kWeights) {
      vision_weights = item.bytes;
      EXPECT_EQ(item.device, 1);
    }
  }
  EXPECT_GT(vision_weights, 0u);
  EXPECT_EQ(gpu.engine->encoders()->placed_weight_bytes(), vision_weights);
  // (The text model's own weights class on a device is left out: its one-value tensors, read on
  // the host, make it 152 bytes short of its plan on tiny-moe with or without a projector.)
  for (const auto& c : gpu.engine->verify().classes) {
    if (c.name != "weights") {
      EXPECT_EQ(c.allocated, c.planned) << c.name;
    }
  }
}

// A prefill chunk ends before an image it cannot hold whole; the image then goes in one.
TEST(MediaScheduler, NeverSplitsAnImage) {
  Loaded l = load(synth_text_model("tiny-moe"));
  ASSERT_TRUE(l.engine);
  auto medium = prepare(*l.engine, mm::MediaKind::kImage, "rose.jpg");
  ASSERT_TRUE(medium);
  engine::Request r = media_prompt(l, {medium}, 40);
  const mm::MediaSpan span = r.media[0];
  const int ubatch = l.engine->n_ubatch();
  ASSERT_GE(ubatch, span.n_tokens) << "the plan makes room for a whole image";
  ASSERT_GT(span.first + span.n_tokens, ubatch) << "the first chunk would cut the image";
  r.max_tokens = 0;
  engine::Scheduler scheduler(*l.engine);
  ASSERT_EQ(scheduler.submit(std::move(r)).refusal, engine::Refusal::kNone);
  std::vector<int> steps;
  while (!scheduler.idle()) {
    auto s = scheduler.step();
    ASSERT_TRUE(s.ok()) << s.error().message();
    steps.push_back(s->n_tokens);
  }
  ASSERT_GE(steps.size(), 2u);
  EXPECT_EQ(steps[0], span.first);  // text and the begin marker, up to the image
  EXPECT_GE(steps[1], span.n_tokens);
}

TEST(MediaScheduler, RefusesWhatThePlanDidNotMakeRoomFor) {
  Loaded l = load(synth_text_model("tiny-e"));
  ASSERT_TRUE(l.engine);
  // An image prepared for 140 tokens, past the 70 the run was planned for.
  const auto bytes = testing_util::read_file(data("rose.jpg"));
  auto big = mm::prepare_image(bytes, *l.engine->encoders()->projector().vision, 140);
  ASSERT_TRUE(big.ok());
  ASSERT_GT((*big)->n_tokens, 70);
  engine::Scheduler scheduler(*l.engine);
  const auto refused = scheduler.submit(media_prompt(l, {*big}));
  EXPECT_EQ(refused.refusal, engine::Refusal::kInvalid);
  EXPECT_NE(refused.message.find("larger than this run takes"), std::string::npos)
      << refused.message;
  auto asked = engine::prepare_media(*l.engine, mm::MediaKind::kImage, bytes, 140);
  ASSERT_FALSE(asked.ok());
  EXPECT_NE(asked.error().message().find("--image-tokens"), std::string::npos);
}

// One pass of six tokens whose rows 1–4 are an image's: with the image seen both ways, its first
// token's logits depend on its last token's embedding; causally they cannot.
TEST(MediaForward, AnImagesFirstTokenSeesItsLast) {
  Loaded l = load(synth_text_model("tiny-moe"));
  ASSERT_TRUE(l.engine);
  const int64_t H = l.engine->spec().n_embd;
  const int n_vocab = l.engine->spec().n_vocab;
  constexpr int T = 6;
  std::vector<float> embeddings(T * H);
  uint32_t state = 7;
  for (float& v : embeddings) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / (1 << 24) - 0.5f;
  }
  const std::vector<int32_t> tokens = {2, 0, 0, 0, 0, 17}, pos = {0, 1, 2, 3, 4, 5}, slot(T, 0),
                             from = {0, 1, 1, 1, 1, 5}, until = {0, 4, 4, 4, 4, 5};
  const std::vector<uint8_t> embedded = {0, 1, 1, 1, 1, 0}, output(T, 1);
  auto first_image_logits = [&](bool both_ways) {
    kv::Cache& cache = l.engine->cache();
    EXPECT_TRUE(cache.reserve(0, T));
    model::Batch b{.tokens = tokens, .pos = pos, .slot = slot, .output = output};
    b.embedded = embedded;
    b.embeddings = embeddings;
    if (both_ways) b.attend_from = from, b.attend_until = until;
    std::vector<float> logits(static_cast<size_t>(T) * n_vocab);
    auto s = l.engine->model().forward(b, cache, logits.data());
    EXPECT_TRUE(s.ok()) << s.error().message();
    cache.release(0);
    return std::vector<float>(logits.begin() + n_vocab, logits.begin() + 2 * n_vocab);
  };
  for (bool both_ways : {true, false}) {
    const auto before = first_image_logits(both_ways);
    for (int64_t i = 0; i < H; ++i) embeddings[4 * H + i] *= -2.0f;  // the last image token
    const Difference d = compare(before, first_image_logits(both_ways));
    if (both_ways) {
      EXPECT_GT(d.max_diff, 1e-3) << "the first image token does not see the last";
    } else {
      EXPECT_EQ(d.max_diff, 0.0) << "a causal token saw a later one";
    }
  }
}

// A causal medium (an image on an E2B-like model) may be cut by a reused prefix: the rest of it is
// evaluated from its embeddings' last rows, and the logits are those of a whole evaluation.
TEST(MediaPrefixCache, ReusesTheStartOfACausalImage) {
  Loaded l = load(synth_text_model("tiny-e"), /*prefix_cache=*/true);
  ASSERT_TRUE(l.engine);
  auto rose = prepare(*l.engine, mm::MediaKind::kImage, "rose.jpg");
  ASSERT_TRUE(rose);
  engine::Scheduler scheduler(*l.engine);
  struct Run {
    std::vector<float> last;
    int cached = 0;
  };
  auto run = [&] {
    engine::Request r = media_prompt(l, {rose});
    r.max_tokens = 0;
    const int last = static_cast<int>(r.prompt.size()) - 1;
    Run out;
    r.prompt_logits = [&](int pos, std::span<const float> logits) {
      if (pos == last) out.last.assign(logits.begin(), logits.end());
    };
    r.on_done = [&](engine::FinishReason, const engine::RequestStats& stats, const std::string&) {
      out.cached = stats.n_cached;
    };
    EXPECT_EQ(scheduler.submit(std::move(r)).refusal, engine::Refusal::kNone);
    EXPECT_TRUE(engine::run_until_idle(scheduler).ok());
    return out;
  };
  const mm::MediaSpan span = media_prompt(l, {rose}).media[0];
  const Run whole = run();
  const Run reused = run();
  EXPECT_EQ(whole.cached, 0);
  EXPECT_GT(reused.cached, span.first) << "the prefix ends inside the image";
  EXPECT_LE(reused.cached, span.last()) << "the prefix ends inside the image";
  EXPECT_LE(compare(whole.last, reused.last).max_diff, 1e-5);
}

// Two prompts that differ only in their image: the first again reuses the image's K/V; the
// second reuses the text before the image and none of the first image's K/V.
TEST(MediaPrefixCache, TellsTwoImagesApart) {
  const fs::path model = synth_text_model("tiny-moe");
  // Two slots: the pool then keeps the sliding layers' windows of more cached prefixes.
  Loaded l = load(model, /*prefix_cache=*/true, /*slots=*/2);
  ASSERT_TRUE(l.engine);
  auto rose = prepare(*l.engine, mm::MediaKind::kImage, "rose.jpg");
  // The same photograph in gray: as many soft tokens (the same shape), other pixels. With the
  // tokens alone as keys the two prompts would be the same.
  auto gray = prepare(*l.engine, mm::MediaKind::kImage, "rose-gray.jpg");
  ASSERT_TRUE(rose && gray);
  ASSERT_EQ(rose->n_tokens, gray->n_tokens);
  ASSERT_NE(rose->hash, gray->hash);
  struct Run {
    std::vector<float> last;  // the logits after the prompt's last token
    int cached = 0;
  };
  engine::Scheduler scheduler(*l.engine);
  // 20 tokens after the image: the reusable prefix (whole blocks) can end past it.
  auto run = [&](const std::shared_ptr<const mm::Media>& image, bool reuse) {
    engine::Request r = media_prompt(l, {image}, 40, 20);
    r.max_tokens = 0;
    r.reuse_prefix = reuse;
    const int last = static_cast<int>(r.prompt.size()) - 1;
    Run out;
    r.prompt_logits = [&](int pos, std::span<const float> logits) {
      if (pos == last) out.last.assign(logits.begin(), logits.end());
    };
    r.on_done = [&](engine::FinishReason, const engine::RequestStats& stats, const std::string&) {
      out.cached = stats.n_cached;
    };
    EXPECT_EQ(scheduler.submit(std::move(r)).refusal, engine::Refusal::kNone);
    EXPECT_TRUE(engine::run_until_idle(scheduler).ok());
    return out;
  };
  const int first = media_prompt(l, {rose}, 40).media[0].first;
  const Run a = run(rose, true);
  const Run a_again = run(rose, true);
  const Run b = run(gray, true);
  const Run b_alone = run(gray, false);
  EXPECT_EQ(a.cached, 0);
  EXPECT_GT(b.cached, 0) << "the text before the image is reused";
  EXPECT_LE(b.cached, first) << "the color image's K/V served the gray one";
  EXPECT_LE(compare(b_alone.last, b.last).max_diff, 1e-5);
  EXPECT_GT(compare(a.last, b.last).max_diff, 1e-2) << "the two images give the same logits";
  EXPECT_GT(a_again.cached, first + rose->n_tokens) << "the same image is not reused";
  EXPECT_LE(compare(a.last, a_again.last).max_diff, 1e-5);
}

}  // namespace
