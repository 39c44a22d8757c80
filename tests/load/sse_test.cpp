// SSE framing, checked by cutting one stream at every byte, and the meaning of each chunk.
#include "load/sse.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using Kind = load::StreamEvent::Kind;

// A stream with everything a server may send: comments (keep-alives), event/id/retry fields, a
// field without a space after the colon, multi-line data, an empty data line, [DONE].
const char* kStream =
    ": keep-alive\n"
    "\n"
    "event: message\n"
    "id: 1\n"
    "data: {\"a\":1}\n"
    "\n"
    "retry: 100\n"
    "data:{\"b\":2}\n"
    "\n"
    "data: line one\n"
    ": a comment between data lines\n"
    "data: line two\n"
    "data\n"
    "\n"
    "data: [DONE]\n"
    "\n";
const std::vector<std::string> kEvents = {"{\"a\":1}", "{\"b\":2}", "line one\nline two\n",
                                          "[DONE]"};

std::string with_crlf(const std::string& lf) {
  std::string out;
  for (char c : lf) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return out;
}

std::vector<std::string> parse_in_pieces(const std::string& stream, const std::vector<size_t>& cuts,
                                         bool* partial = nullptr) {
  load::SseParser parser;
  std::vector<std::string> events;
  size_t from = 0;
  auto on_data = [&](std::string_view data) { events.emplace_back(data); };
  for (size_t cut : cuts) {
    parser.feed(std::string_view(stream).substr(from, cut - from), on_data);
    from = cut;
  }
  parser.feed(std::string_view(stream).substr(from), on_data);
  if (partial) *partial = parser.has_partial_event();
  return events;
}

TEST(SseParser, SameEventsWhereverTheStreamIsCut) {
  for (const std::string& stream : {std::string(kStream), with_crlf(kStream)}) {
    bool partial = true;
    EXPECT_EQ(parse_in_pieces(stream, {}, &partial), kEvents);
    EXPECT_FALSE(partial);
    for (size_t cut = 0; cut <= stream.size(); ++cut) {
      ASSERT_EQ(parse_in_pieces(stream, {cut}), kEvents) << "cut at byte " << cut;
      // And a second cut after it, so a CRLF or a field can be split three ways.
      for (size_t second = cut; second <= std::min(stream.size(), cut + 3); ++second)
        ASSERT_EQ(parse_in_pieces(stream, {cut, second}), kEvents)
            << "cuts at " << cut << ", " << second;
    }
    std::vector<size_t> every_byte;
    for (size_t i = 1; i < stream.size(); ++i) every_byte.push_back(i);
    EXPECT_EQ(parse_in_pieces(stream, every_byte), kEvents);
  }
}

TEST(SseParser, AnUnfinishedEventIsReportedAndNotDelivered) {
  bool partial = false;
  EXPECT_EQ(parse_in_pieces("data: {\"a\":1}\n\ndata: {\"b\"", {}, &partial),
            std::vector<std::string>{"{\"a\":1}"});
  EXPECT_TRUE(partial);
  // A complete data line without the blank line that ends the event is still unfinished.
  EXPECT_EQ(parse_in_pieces("data: x\n", {}, &partial), std::vector<std::string>{});
  EXPECT_TRUE(partial);
  // Comments alone deliver nothing and leave nothing pending.
  EXPECT_EQ(parse_in_pieces(": ping\n\n: ping\n\n", {}, &partial), std::vector<std::string>{});
  EXPECT_FALSE(partial);
}

TEST(InterpretEvent, ContentReasoningAndToolCallsAreTokens) {
  EXPECT_EQ(load::interpret_event(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})").kind,
            Kind::kTokens);
  EXPECT_EQ(load::interpret_event(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})").kind,
            Kind::kTokens);
  EXPECT_EQ(load::interpret_event(R"({"choices":[{"delta":{"tool_calls":[{"index":0}]}}]})").kind,
            Kind::kTokens);
}

TEST(InterpretEvent, RoleOnlyEmptyContentAndFinishChunksCarryNoTokens) {
  EXPECT_EQ(
      load::interpret_event(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})").kind,
      Kind::kEmpty);
  EXPECT_EQ(load::interpret_event(R"({"choices":[{"delta":{},"finish_reason":"stop"}]})").kind,
            Kind::kEmpty);
  EXPECT_EQ(load::interpret_event(R"({"choices":[{"delta":{"content":null}}]})").kind,
            Kind::kEmpty);
  EXPECT_EQ(load::interpret_event(R"({"choices":[{"delta":{"tool_calls":[]}}]})").kind,
            Kind::kEmpty);
}

TEST(InterpretEvent, UsageIsRead) {
  const auto usage =
      load::interpret_event(R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}})");
  EXPECT_EQ(usage.kind, Kind::kEmpty);
  EXPECT_EQ(usage.prompt_tokens, 5);
  EXPECT_EQ(usage.completion_tokens, 7);
  // Usage on a chunk that also carries a token.
  const auto both = load::interpret_event(
      R"({"choices":[{"delta":{"content":"."}}],"usage":{"prompt_tokens":2,"completion_tokens":3}})");
  EXPECT_EQ(both.kind, Kind::kTokens);
  EXPECT_EQ(both.completion_tokens, 3);
  // No usage: all stay -1.
  const auto none = load::interpret_event(R"({"choices":[{"delta":{"content":"a"}}]})");
  EXPECT_EQ(none.completion_tokens, -1);
  EXPECT_EQ(none.prompt_tokens, -1);
  EXPECT_EQ(none.cached_tokens, -1);
  // OpenAI's prefix-cache report.
  const auto cached =
      load::interpret_event(R"({"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,)"
                            R"("prompt_tokens_details":{"cached_tokens":32}}})");
  EXPECT_EQ(cached.prompt_tokens, 40);
  EXPECT_EQ(cached.cached_tokens, 32);
}

TEST(InterpretEvent, DoneAndErrors) {
  EXPECT_EQ(load::interpret_event("[DONE]").kind, Kind::kDone);
  const auto error =
      load::interpret_event(R"({"error":{"message":"context too long","type":"invalid"}})");
  EXPECT_EQ(error.kind, Kind::kError);
  EXPECT_EQ(error.detail, "context too long");
  const auto bare = load::interpret_event(R"({"error":"overloaded"})");
  EXPECT_EQ(bare.kind, Kind::kError);
  EXPECT_EQ(bare.detail, "\"overloaded\"");
}

TEST(InterpretEvent, MalformedChunksSayWhatIsWrong) {
  struct Case {
    const char* data;
    const char* detail;
  };
  for (const Case& c : {Case{"not json", "not JSON"}, Case{"[DONE] ", "not JSON"},
                        Case{"[1,2]", "not a JSON object"}, Case{R"({"id":"x"})", "no \"choices\""},
                        Case{R"({"choices":{}})", "no \"choices\""},
                        Case{R"({"choices":[1]})", "choice is not an object"},
                        Case{R"({"choices":[{"delta":"x"}]})", "\"delta\" is not an object"}}) {
    const auto e = load::interpret_event(c.data);
    EXPECT_EQ(e.kind, Kind::kMalformed) << c.data;
    EXPECT_NE(e.detail.find(c.detail), std::string::npos) << c.data << " → " << e.detail;
  }
}

}  // namespace
