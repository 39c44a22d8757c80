// The KV pool's behaviour as a running server shows it: a repeated prompt is served from the prefix
// cache (the response's usage.prompt_tokens_details.cached_tokens, /metrics' cached-token counter
// and hit rate), and two sequences that outgrow a pool of one context are preempted and resumed
// (/metrics' preemption counter) without losing either answer.
#include <future>
#include <string>

#include "kv/cache.h"
#include "model/model.h"
#include "running_server.h"

namespace {

using namespace server_test;

// A greedy completion of exactly max_tokens tokens (the end token does not stop it).
json complete(const Running& s, const std::string& prompt, int max_tokens) {
  auto c = s.client();
  int status = 0;
  json r = post(
      c, "/v1/completions",
      {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}},
      &status);
  EXPECT_EQ(status, 200) << r.dump();
  return r;
}

// A prompt of 60 tokens or so, several KV blocks of 16.
std::string long_prompt() {
  return "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
         "sunshine. One day, she saw a big, red ball in the park and wanted to play with it.";
}

TEST(CacheMetrics, ARepeatedPromptIsServedFromThePrefixCache) {
  Running s(small(2, 256));
  const json first = complete(s, long_prompt(), 1);
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const int n_prompt = first["usage"]["prompt_tokens"];
  ASSERT_GT(n_prompt, 32);
  const json second = complete(s, long_prompt(), 1);
  const int cached = second["usage"]["prompt_tokens_details"]["cached_tokens"];
  // Every whole block of the prompt but the one its last token falls in (it must be evaluated).
  EXPECT_EQ(cached, (n_prompt - 1) / 16 * 16);
  EXPECT_EQ(second["choices"][0]["text"], first["choices"][0]["text"]);
  const std::string text = metrics_text(s);
  EXPECT_EQ(metric(text, "headroom_prompt_tokens_cached_total"), cached);
  EXPECT_DOUBLE_EQ(metric(text, "headroom_prefix_cache_hit_rate"),
                   static_cast<double>(cached) / (2 * n_prompt));
}

// A pool of exactly one 256-position context and two slots: two greedy sequences of ~20 prompt
// tokens growing to 200 tokens each cannot both fit, so the younger gives its blocks back and
// resumes when the older one ends. Both answers are their solo answers.
TEST(CacheMetrics, SequencesThatOutgrowThePoolArePreemptedAndResumed) {
  engine::EngineOptions eo = small(2, 256);
  eo.model_path = model_path();
  {
    auto probe = engine::Engine::load(eo);
    ASSERT_TRUE(probe.ok()) << probe.error().message();
    kv::CacheConfig one = (*probe)->cache().config();
    one.n_slots = 1;
    one.pool_blocks.clear();
    auto bytes = kv::storage_bytes(model::kv_layers((*probe)->spec()), one);
    ASSERT_TRUE(bytes.ok()) << bytes.error().message();
    eo.request.kv_budget = *bytes;
  }
  Running s(eo);
  const std::string a = "Once upon a time, there was a little dog", b = "The sun was hot and";
  const json solo_a = complete(s, a, 200), solo_b = complete(s, b, 200);
  EXPECT_EQ(metric(metrics_text(s), "headroom_preemptions_total"), 0);
  auto together_a = std::async(std::launch::async, [&] { return complete(s, a, 200); });
  auto together_b = std::async(std::launch::async, [&] { return complete(s, b, 200); });
  const json got_a = together_a.get(), got_b = together_b.get();
  EXPECT_EQ(got_a["choices"][0]["text"], solo_a["choices"][0]["text"]);
  EXPECT_EQ(got_b["choices"][0]["text"], solo_b["choices"][0]["text"]);
  EXPECT_GE(metric(metrics_text(s), "headroom_preemptions_total"), 1);
}

}  // namespace
