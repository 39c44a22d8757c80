// The inference gateway's model-server protocol on /metrics, scraped under load: queued and
// running requests (the queue grows when the slots are full), KV-cache use 0–1 tracking the
// admitted sequences, the cache's block size and block count, LoRA info — under headroom's names
// and the vLLM names the endpoint picker reads, which must agree.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "raw_client.h"
#include "running_server.h"

namespace {

using namespace server_test;
using namespace std::chrono_literals;

constexpr int kSlots = 2, kCtx = 8192, kBlock = 16, kMaxTokens = 8000;

struct Load {
  double running, waiting, usage;
};

// One scrape, with the protocol's names checked against headroom's own.
Load scrape(const Running& s) {
  const std::string text = metrics_text(s);
  const std::string model = "{model_name=\"stories260K\"}";
  const Load load{metric(text, "vllm:num_requests_running" + model),
                  metric(text, "vllm:num_requests_waiting" + model),
                  metric(text, "vllm:kv_cache_usage_perc" + model)};
  EXPECT_EQ(load.running, metric(text, "headroom_requests_active"));
  EXPECT_EQ(load.waiting, metric(text, "headroom_requests_queued"));
  EXPECT_EQ(load.usage, metric(text, "headroom_kv_cache_usage_ratio"));
  EXPECT_EQ(load.usage, metric(text, "vllm:gpu_cache_usage_perc" + model));
  EXPECT_DOUBLE_EQ(load.usage, metric(text, "headroom_kv_cache_bytes_used{device=\"cpu\"}") /
                                   metric(text, "headroom_kv_cache_bytes_total{device=\"cpu\"}"));
  EXPECT_GE(load.usage, 0);
  EXPECT_LE(load.usage, 1);
  return load;
}

Load wait_for(const Running& s, double running, double waiting) {
  Load load{};
  for (int i = 0; i < 500; ++i) {
    load = scrape(s);
    if (load.running == running && load.waiting == waiting) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(load.running, running);
  EXPECT_EQ(load.waiting, waiting);
  return load;
}

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

TEST(GatewayMetrics, QueueGrowsWhenSlotsAreFullAndKvUseTracksAdmittedSequences) {
  Running s(small(kSlots, kCtx));
  // The pool holds every slot at the full context: 2 × 8192 / 16 blocks of 16 positions.
  const int n_blocks = kSlots * ceil_div(kCtx, kBlock);
  const std::string text = metrics_text(s);
  EXPECT_EQ(metric(text, "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"" +
                             std::to_string(n_blocks) + "\",model_name=\"stories260K\"}"),
            1);
  EXPECT_EQ(metric(text, "headroom_kv_cache_block_size_tokens"), kBlock);
  EXPECT_EQ(metric(text, "headroom_kv_cache_blocks"), n_blocks);
  EXPECT_NE(text.find("vllm:lora_requests_info{max_lora=\"0\",running_lora_adapters=\"\",waiting_"
                      "lora_adapters=\"\"}"),
            std::string::npos);
  EXPECT_EQ(scrape(s).usage, 0);

  const std::string prompt = "Once upon a time";
  const int n_prompt = static_cast<int>(s.tokenizer().encode(prompt, {.add_bos = true}).size());
  const std::string body =
      json{{"prompt", prompt}, {"max_tokens", kMaxTokens}, {"stream", true}}.dump();
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  // A sequence holds at least its prompt and at most what it may grow to.
  auto lower = [&](int n) {
    return n * ceil_div(n_prompt, kBlock) / static_cast<double>(n_blocks);
  };
  auto upper = [&](int n) {
    return n * ceil_div(std::min(n_prompt + kMaxTokens, kCtx), kBlock) /
           static_cast<double>(n_blocks);
  };

  std::vector<RawClient> clients;
  clients.emplace_back(s.port());
  clients.back().send(request);
  const Load one = wait_for(s, 1, 0);
  EXPECT_GE(one.usage, lower(1));
  EXPECT_LE(one.usage, upper(1));
  // Five more: one takes the second slot, four queue.
  for (int i = 0; i < 5; ++i) {
    clients.emplace_back(s.port());
    clients.back().send(request);
  }
  const Load full = wait_for(s, 2, 4);
  EXPECT_GE(full.usage, lower(2));
  EXPECT_LE(full.usage, upper(2));
  EXPECT_GT(full.usage, one.usage);
  // The clients leave: every request is cancelled, the queue empties, the cache is free.
  clients.clear();
  const Load idle = wait_for(s, 0, 0);
  EXPECT_EQ(idle.usage, 0);
}

}  // namespace
