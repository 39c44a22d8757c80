// One choice read back as its client sees it, on hand-written token pieces: the reasoning channel
// and its token count, content and tool calls, logprobs carried by the chunk that first shows
// something, and the whole choice equal to its chunks joined.
#include "server/choice_reader.h"

#include <gtest/gtest.h>

#include "chat/template.h"

namespace {

chat::ReplyOptions gemma(bool tools) {
  return {.format = chat::output_format_of(*chat::builtin_template("gemma4")),
          .parse_tools = tools};
}

server::TokenLogprob lp(const std::string& token, float value) {
  return {.token = token, .logprob = value};
}

TEST(ChoiceReader, ReasoningIsCountedPerTokenAndSeparatedFromContent) {
  server::ChoiceReader reader(0, true, gemma(false), true);
  std::vector<server::Choice> chunks;
  const std::vector<std::string> pieces = {"<|channel>", "thought", "\n", "Hm",
                                           "<channel|>", "Hi",      "!"};
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto l = lp(pieces[i], -static_cast<float>(i + 1));
    reader.push(pieces[i], &l, chunks);
  }
  reader.finish(engine::FinishReason::kStop, "", chunks);
  // Every token from the open marker to the close marker is a reasoning token.
  EXPECT_EQ(reader.reasoning_tokens(), 5);
  const server::Choice& whole = reader.whole();
  EXPECT_EQ(whole.reasoning, "Hm");
  EXPECT_EQ(whole.text, "Hi!");
  EXPECT_EQ(whole.finish_reason, "stop");
  ASSERT_TRUE(whole.logprobs);
  EXPECT_EQ(whole.logprobs->size(), pieces.size());
  // Chunks: "Hm" carries the logprobs of the four tokens before it; then "Hi", "!", the end.
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].reasoning, "Hm");
  EXPECT_EQ(chunks[0].logprobs->size(), 4u);
  EXPECT_EQ(chunks[1].text, "Hi");
  ASSERT_EQ(chunks[1].logprobs->size(), 2u);  // the close marker's and "Hi"'s
  EXPECT_EQ((*chunks[1].logprobs)[0].token, "<channel|>");
  EXPECT_EQ(chunks[2].text, "!");
  EXPECT_EQ(chunks[3].finish_reason, "stop");
  EXPECT_FALSE(chunks[3].logprobs);
}

TEST(ChoiceReader, ACallEndsTheChoiceWithToolCalls) {
  server::ChoiceReader reader(2, true, gemma(true), false);
  std::vector<server::Choice> chunks;
  for (const std::string piece :
       {"<|tool_call>", "call", ":f{a:", "<|\"|>", "x", "<|\"|>", "}", "<tool_call|>"}) {
    reader.push(piece, nullptr, chunks);
  }
  reader.finish(engine::FinishReason::kStop, "", chunks);
  EXPECT_EQ(reader.whole().finish_reason, "tool_calls");
  ASSERT_EQ(reader.whole().tool_calls.size(), 1u);
  EXPECT_EQ(reader.whole().tool_calls[0].arguments, "{\"a\":\"x\"}");
  EXPECT_EQ(reader.whole().text, "");
  for (const auto& c : chunks) EXPECT_EQ(c.index, 2);
  EXPECT_EQ(chunks.back().finish_reason, "tool_calls");
}

TEST(ChoiceReader, CompletionsReadTextAsItIsAndHeldTextEndsIt) {
  server::ChoiceReader reader(0, false, gemma(true), false);
  std::vector<server::Choice> chunks;
  reader.push("<|tool_call>call:f{}", nullptr, chunks);
  reader.push("", nullptr, chunks);  // a token whose text is held back (a stop string's start)
  reader.finish(engine::FinishReason::kLength, " end", chunks);
  EXPECT_EQ(reader.whole().text, "<|tool_call>call:f{} end");
  EXPECT_TRUE(reader.whole().tool_calls.empty());
  EXPECT_EQ(reader.whole().finish_reason, "length");
}

}  // namespace
