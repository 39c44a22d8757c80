// Reading one choice's tokens into what the client receives (see choice_reader.h).
#include "server/choice_reader.h"

#include <utility>

namespace server {

namespace {

// Each choice's calls get ids of their own: PREFIX + choice + "_" + call.
chat::ReplyOptions for_choice(chat::ReplyOptions reply, int index) {
  reply.call_id_prefix += std::to_string(index) + "_";
  return reply;
}

}  // namespace

ChoiceReader::ChoiceReader(int index, bool chat, const chat::ReplyOptions& reply, bool logprobs)
    : logprobs_(logprobs), parser_(chat ? for_choice(reply, index) : chat::ReplyOptions{}) {
  whole_.index = index;
  if (logprobs_) whole_.logprobs.emplace();
}

void ChoiceReader::push(const std::string& piece, const TokenLogprob* logprob,
                        std::vector<Choice>& chunks) {
  if (logprobs_ && logprob) {
    whole_.logprobs->push_back(*logprob);
    pending_.push_back(*logprob);
  }
  chat::ReplyDelta delta = parser_.push(piece);
  if (parser_.last_push_was_reasoning()) ++reasoning_tokens_;
  take(delta);
  if (!delta.empty()) chunks.push_back(chunk_of(std::move(delta)));
}

void ChoiceReader::finish(engine::FinishReason reason, const std::string& rest,
                          std::vector<Choice>& chunks) {
  chat::ReplyDelta delta = parser_.push(rest);
  chat::ReplyDelta last = parser_.finish();
  delta.reasoning += last.reasoning;
  delta.content += last.content;
  delta.tool_calls.insert(delta.tool_calls.end(), last.tool_calls.begin(), last.tool_calls.end());
  take(delta);
  if (!delta.empty() || !pending_.empty()) chunks.push_back(chunk_of(std::move(delta)));
  whole_.tool_calls = parser_.calls();
  whole_.finish_reason = finish_reason_json(reason, !whole_.tool_calls.empty());
  Choice final_chunk = chunk_of({});
  final_chunk.finish_reason = whole_.finish_reason;
  final_chunk.logprobs.reset();
  chunks.push_back(std::move(final_chunk));
}

void ChoiceReader::take(const chat::ReplyDelta& delta) {
  whole_.text += delta.content;
  whole_.reasoning += delta.reasoning;
}

Choice ChoiceReader::opening() const {
  Choice c;
  c.index = whole_.index;
  c.role = true;
  return c;
}

Choice ChoiceReader::chunk_of(chat::ReplyDelta delta) {
  Choice c;
  c.index = whole_.index;
  c.text = std::move(delta.content);
  c.reasoning = std::move(delta.reasoning);
  c.tool_call_deltas = std::move(delta.tool_calls);
  if (logprobs_) c.logprobs = std::exchange(pending_, {});
  return c;
}

}  // namespace server
