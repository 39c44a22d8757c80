// The prompt mix: errors that name the line and the field, request bodies, and the weighted
// round-robin's shares and order.
#include "load/mix.h"

#include <gtest/gtest.h>

#include <thread>

#include "testing/testing.h"

namespace {

const char* kGood = R"({"name": "a", "prompt": "hi"})";

// The error for a mix whose line 4 (after a comment and a blank line) is `bad`.
std::string error_at_line_4(const std::string& bad) {
  const std::string text = std::string("# comment\n") + kGood + "\n\n" + bad + "\n";
  auto mix = load::parse_mix(text, "mix.jsonl");
  EXPECT_FALSE(mix.ok()) << bad;
  return mix.ok() ? "" : mix.error().message();
}

TEST(ParseMix, ErrorsNameTheLineAndTheField) {
  struct Case {
    const char* line;
    const char* field;
  };
  for (const Case& c : {
           Case{R"({"name": "b", "prompt": "x", "weight": 0})", "\"weight\""},
           Case{R"({"name": "b", "prompt": "x", "weight": -1})", "\"weight\""},
           Case{R"({"name": "b", "prompt": "x", "weight": "2"})", "\"weight\""},
           Case{R"({"name": "b", "prompt": "x", "max_tokens": 0})", "\"max_tokens\""},
           Case{R"({"name": "b", "prompt": "x", "max_tokens": 1.5})", "\"max_tokens\""},
           Case{R"({"prompt": "x"})", "\"name\""},
           Case{R"({"name": "", "prompt": "x"})", "\"name\""},
           Case{R"({"name": "b"})", "\"messages\" or \"prompt\""},
           Case{R"({"name": "b", "prompt": "x", "messages": [{"role": "user", "content": "y"}]})",
                "\"messages\" or \"prompt\""},
           Case{R"({"name": "b", "prompt": 3})", "\"prompt\""},
           Case{R"({"name": "b", "messages": []})", "\"messages\""},
           Case{R"({"name": "b", "messages": [{"content": "y"}]})", "\"role\""},
           Case{R"({"name": "b", "prompt": "x", "response_format": {"schema": {}}})",
                "\"response_format\""},
           Case{R"({"name": "b", "prompt": "x", "temperature": 0.5})",
                "unknown field \"temperature\""},
           Case{R"({"name": "a", "prompt": "again"})", "duplicate name \"a\""},
           Case{R"({"name": "b", "prompt": "x")", "not valid JSON"},
           Case{R"(["name", "b"])", "JSON object"},
       }) {
    const std::string message = error_at_line_4(c.line);
    EXPECT_EQ(message.rfind("mix.jsonl:4: ", 0), 0u) << c.line << " → " << message;
    EXPECT_NE(message.find(c.field), std::string::npos) << c.line << " → " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  }
}

TEST(ParseMix, EmptyMixAndMissingFileAreErrors) {
  auto empty = load::parse_mix("# only a comment\n\n   \n", "empty.jsonl");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message().find("empty.jsonl"), std::string::npos);
  EXPECT_NE(empty.error().message().find("no requests"), std::string::npos);
  auto missing = load::read_mix("/nonexistent/mix.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("/nonexistent/mix.jsonl"), std::string::npos);
}

TEST(ParseMix, ReadsFieldsAndTurnsAPromptIntoAUserMessage) {
  auto mix = load::parse_mix(
      "{\"name\": \"p\", \"prompt\": \"hello\"}\r\n"
      "{\"name\": \"m\", \"weight\": 2.5, \"max_tokens\": 7, \"messages\": [{\"role\": \"system\", "
      "\"content\": \"s\"}, "
      "{\"role\": \"user\", \"content\": \"u\"}], \"response_format\": {\"type\": "
      "\"json_object\"}}\n",
      "t");
  ASSERT_TRUE(mix.ok()) << mix.error().message();
  ASSERT_EQ(mix->items.size(), 2u);
  const auto& p = mix->items[0];
  EXPECT_EQ(p.messages, nlohmann::json::parse(R"([{"role":"user","content":"hello"}])"));
  EXPECT_EQ(p.weight, 1);
  EXPECT_EQ(p.max_tokens, 0);
  EXPECT_TRUE(p.response_format.is_null());
  const auto& m = mix->items[1];
  EXPECT_EQ(m.weight, 2.5);
  EXPECT_EQ(m.max_tokens, 7);
  EXPECT_EQ(m.messages.size(), 2u);

  const auto body = load::request_body(p, "tiny", 99);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["max_tokens"], 99);  // the run's default: the item sets none
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_FALSE(body.contains("response_format"));
  const auto own = load::request_body(m, "", 99);
  EXPECT_EQ(own["max_tokens"], 7);
  EXPECT_FALSE(own.contains("model"));  // no model known: the field is left out
  EXPECT_EQ(own["response_format"]["type"], "json_object");
}

TEST(ParseMix, TheShippedDefaultMixParses) {
  auto mix = load::read_mix((testing_util::source_dir() / "bench/load/default-mix.jsonl").string());
  ASSERT_TRUE(mix.ok()) << mix.error().message();
  EXPECT_GE(mix->items.size(), 2u);
}

load::Mix mix_of(std::vector<double> weights) {
  load::Mix mix;
  for (size_t i = 0; i < weights.size(); ++i) {
    load::MixItem item;
    item.name = "item" + std::to_string(i);
    item.weight = weights[i];
    mix.items.push_back(item);
  }
  return mix;
}

TEST(MixSchedule, SharesMatchTheWeightsOverEveryCycle) {
  const std::vector<double> weights = {3, 1, 1, 5};  // a cycle is 10 picks
  load::MixSchedule schedule(mix_of(weights));
  std::vector<int> counts(weights.size(), 0);
  for (int pick = 1; pick <= 1000; ++pick) {
    ++counts[schedule.next()];
    for (size_t i = 0; i < weights.size(); ++i) {
      const double ideal = pick * weights[i] / 10;
      // Smooth: never more than one pick away from the ideal share, at any point.
      ASSERT_LT(std::abs(counts[i] - ideal), 1.0 + 1e-9) << "item " << i << " after " << pick;
    }
    if (pick % 10 == 0) {
      for (size_t i = 0; i < weights.size(); ++i)
        ASSERT_EQ(counts[i], pick / 10 * weights[i]) << "item " << i;
    }
  }
}

TEST(MixSchedule, FractionalWeightsAndASingleItem) {
  load::MixSchedule fractional(mix_of({0.5, 1.5}));
  std::vector<int> counts(2, 0);
  for (int pick = 0; pick < 400; ++pick) ++counts[fractional.next()];
  EXPECT_EQ(counts[0], 100);
  EXPECT_EQ(counts[1], 300);
  load::MixSchedule single(mix_of({2}));
  for (int pick = 0; pick < 5; ++pick) EXPECT_EQ(single.next(), 0u);
}

TEST(MixSchedule, TwoSchedulesOfTheSameMixAgreeAndInterleave) {
  load::MixSchedule a(mix_of({3, 1, 1})), b(mix_of({3, 1, 1}));
  std::vector<size_t> first, second;
  for (int pick = 0; pick < 50; ++pick) {
    first.push_back(a.next());
    second.push_back(b.next());
  }
  EXPECT_EQ(first, second);
  // Interleaved, not in runs: the heavy item never comes more than twice in a row at 3:1:1.
  for (size_t i = 2; i < first.size(); ++i)
    EXPECT_FALSE(first[i] == 0 && first[i - 1] == 0 && first[i - 2] == 0) << "at " << i;
  // The same cycle repeats.
  for (size_t i = 5; i < first.size(); ++i) EXPECT_EQ(first[i], first[i - 5]);
}

TEST(MixSchedule, SharesHoldWhenManyThreadsPick) {
  load::MixSchedule schedule(mix_of({3, 1, 1}));
  std::vector<std::vector<int>> counts(8, std::vector<int>(3, 0));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int pick = 0; pick < 625; ++pick) ++counts[t][schedule.next()];
    });
  for (auto& t : threads) t.join();
  std::vector<int> total(3, 0);
  for (const auto& c : counts)
    for (int i = 0; i < 3; ++i) total[i] += c[i];
  EXPECT_EQ(total, (std::vector<int>{3000, 1000, 1000}));  // 5000 picks = 1000 whole cycles
}

}  // namespace
