// Tool calls read back from a model's output as it streams: content, and each call's name and
// JSON arguments in the pieces the OpenAI API streams them in. Byte-at-a-time safe: text that may
// be the start of a call is held until it is known not to be. A call that does not parse is
// returned as content, never dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/gemma_arguments.h"
#include "chat/output_format.h"

namespace chat {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of an object
};

// One step of one call: the first carries id and name (and arguments ""), later ones a piece of
// the arguments' JSON text.
struct ToolCallDelta {
  int index = 0;
  std::string id, name;  // on a call's first delta only
  std::string arguments;
};

struct ToolCallParserOptions {
  ToolSyntax syntax = ToolSyntax::kNone;
  // Decoding was constrained so every call is well formed: Gemma 4 calls stream their arguments
  // as they are read, and a call the output ends inside stays a (partial) call. Otherwise each
  // call is released whole once it has parsed, and a failed or unfinished one becomes content.
  bool eager = false;
  std::string id_prefix = "call_";  // call ids are id_prefix + index
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallParserOptions options);
  // Reads more output; appends the text settled as content and the settled call deltas.
  void push(std::string_view text, std::string& content, std::vector<ToolCallDelta>& deltas);
  // The output ended: what is still held is settled.
  void finish(std::string& content);

  const std::vector<ToolCall>& calls() const { return calls_; }
  // Whether some call-like text failed to parse (and went to content).
  bool saw_malformed() const { return malformed_; }

 private:
  enum State : unsigned char {
    kText,       // content; a prefix of the open marker may be held
    kCallWord,   // Gemma 4: "call:" after the open marker
    kName,       // Gemma 4: the function name up to '{'
    kArguments,  // Gemma 4: the arguments object
    kJson,       // Hermes / Llama 3: the call's JSON object
    kClose,      // the close marker (after optional whitespace for JSON calls)
  };
  void push_byte(char byte, std::string& content, std::vector<ToolCallDelta>& deltas);
  void text_byte(char byte, std::string& content);
  void start_call();
  void call_byte(char byte, std::vector<ToolCallDelta>& deltas, bool& failed);
  void finish_call(std::vector<ToolCallDelta>& deltas);
  bool settle_json_call();
  void emit_header(std::vector<ToolCallDelta>& deltas);
  void emit_arguments(std::string piece, std::vector<ToolCallDelta>& deltas);
  void give_up(std::string& content);
  void flush_space(std::string& content);

  ToolCallParserOptions options_;
  std::string_view open_, close_;
  std::vector<ToolCall> calls_;
  bool malformed_ = false;
  State state_ = kText;
  bool at_start_ = true;     // only whitespace so far (Llama 3 calls start the reply)
  bool after_call_ = false;  // a call ended and no content came since
  std::string space_;        // whitespace after a call, content only if text follows
  std::string held_;         // kText: a possible open marker; in a call: the call's raw text
  size_t matched_ = 0;       // bytes of the marker or word being matched
  ToolCall current_;
  bool header_sent_ = false;
  GemmaArgumentReader reader_;
  // kJson: the call's JSON text and its extent (bracket depth, inside a string, after a backslash).
  std::string json_;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
};

}  // namespace chat
