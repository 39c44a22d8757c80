// server: one choice of a response as its client sees it. The shown text of each generated token
// (stop strings already held back) is read into reasoning, content and tool calls with the chat
// template's parsers, beside its logprobs: a chunk per token that shows something while
// streaming, the whole choice at the end.
#pragma once

#include <string>
#include <vector>

#include "chat/reply.h"
#include "server/api.h"

namespace server {

class ChoiceReader {
 public:
  // `logprobs`: the client asked for them. Completions read text as it is (no parsers).
  ChoiceReader(int index, bool chat, const chat::ReplyOptions& reply, bool logprobs);

  // The chunk that opens a chat stream: the role, no content yet.
  Choice opening() const;
  // One generated token: its shown text (empty while held back) and logprob (null when not asked
  // for). Appends the chunk to stream for it, if it shows anything; a held token's logprob goes
  // with the next chunk.
  void push(const std::string& piece, const TokenLogprob* logprob, std::vector<Choice>& chunks);
  // The request ended: `rest` is the text that was held back to the end (no token of its own).
  // Appends what it shows, then the chunk that carries finish_reason.
  void finish(engine::FinishReason reason, const std::string& rest, std::vector<Choice>& chunks);

  // The whole choice (after finish).
  const Choice& whole() const { return whole_; }
  // Generated tokens read inside the reasoning channel (usage.completion_tokens_details).
  int reasoning_tokens() const { return reasoning_tokens_; }

 private:
  Choice chunk_of(chat::ReplyDelta delta);
  void take(const chat::ReplyDelta& delta);

  bool logprobs_;
  chat::ReplyParser parser_;
  Choice whole_;
  std::vector<TokenLogprob> pending_;  // logprobs of tokens not yet in a chunk
  int reasoning_tokens_ = 0;
};

}  // namespace server
