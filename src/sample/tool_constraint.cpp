// Tool-call constraints: a small automaton over the call text (a trie of the functions' call
// prefixes, the arguments through the function's JSON grammar, the suffix, then the next call or
// the end) walked over the vocabulary like the JSON constraint.
//
// Gemma 4 writes arguments in its own syntax: the bytes go through chat::GemmaArgumentReader,
// whose JSON output feeds the grammar. Inside a string the reader holds bytes that may begin the
// closing delimiter; such a state lives only while the string can still either go on with those
// bytes as text or close there.
#include "sample/tool_constraint.h"

#include <fmt/format.h>

#include "chat/gemma_arguments.h"
#include "sample/grammar.h"
#include "sample/json_schema.h"
#include "sample/token_index.h"
#include "sample/walked_constraint.h"

namespace sample {
namespace {

struct CallProgram {
  std::vector<std::unique_ptr<Grammar>> grammars;  // per function, its arguments object
  LiteralTrie first;                               // function i's call prefix, index i
  LiteralTrie reasoning;  // the same plus the reasoning open marker at index functions.size()
  LiteralTrie next;       // separator + call prefix
  std::string suffix;     // after the arguments
  std::string reasoning_close;
  bool gemma = false;
  bool with_reasoning = false;
  int max_calls = 0;  // 0: any number
  int32_t n_functions = 0;
};

class CallState {
 public:
  explicit CallState(const CallProgram* p) : p_(p), grammar_(p->grammars[0].get()) {}

  bool feed_from(const CallState& from, uint8_t byte) {
    *this = from;
    return feed(byte);
  }

  bool feed(uint8_t byte) {
    switch (phase_) {
      case kStart:
        trie_ = calls_ > 0 ? &p_->next
                           : (p_->with_reasoning && !reasoned_ ? &p_->reasoning : &p_->first);
        node_ = 0;
        phase_ = kTrie;
        [[fallthrough]];
      case kTrie: {
        const int32_t next = trie_->child(node_, byte);
        if (next >= 0) {
          node_ = next;
          const auto& n = trie_->nodes[next];
          if (n.terminal >= 0 && n.children.empty()) enter(n.terminal);
          return true;
        }
        // A prefix that is also the start of a longer one ("get" and "get_weather") ends here.
        const int32_t terminal = trie_->nodes[node_].terminal;
        if (terminal < 0) return die();
        enter(terminal);
        return feed(byte);
      }
      case kReasoning: {
        const std::string& close = p_->reasoning_close;
        if (byte == static_cast<uint8_t>(close[matched_])) {
          if (++matched_ == close.size()) phase_ = kStart;
        } else {
          matched_ = byte == static_cast<uint8_t>(close[0]) ? 1 : 0;
        }
        return true;
      }
      case kArguments:
        return arguments_byte(byte);
      case kSuffix:
        if (byte != static_cast<uint8_t>(p_->suffix[matched_])) return die();
        if (++matched_ == p_->suffix.size()) {
          ++calls_;
          phase_ = kAfterCall;
        }
        return true;
      case kAfterCall:
        if (p_->max_calls > 0 && calls_ >= p_->max_calls) return die();
        phase_ = kStart;
        return feed(byte);
      case kDead:
        break;
    }
    return false;
  }

  bool dead() const { return phase_ == kDead; }
  bool complete() const { return phase_ == kAfterCall; }
  // Inside reasoning with no part of the close marker seen: any token without '<' is allowed.
  bool free_reasoning() const {
    return phase_ == kReasoning && matched_ == 0 && p_->reasoning_close[0] == '<';
  }
  // Inside an argument string where whole plain characters (and, in Gemma's syntax, no '<') go
  // to the grammar as they are: their count against the grammar's budget decides. -1 otherwise.
  int64_t plain_string_budget() const {
    if (phase_ != kArguments || (p_->gemma && !reader_.in_plain_string())) return -1;
    return grammar_.plain_string_budget();
  }

 private:
  enum Phase : uint8_t { kStart, kTrie, kReasoning, kArguments, kSuffix, kAfterCall, kDead };

  bool die() {
    phase_ = kDead;
    return false;
  }

  void enter(int32_t terminal) {
    if (terminal == p_->n_functions) {  // the reasoning open marker
      phase_ = kReasoning;
      reasoned_ = true;
      matched_ = 0;
      return;
    }
    phase_ = kArguments;
    grammar_ = GrammarState(p_->grammars[terminal].get());
    reader_ = chat::GemmaArgumentReader(/*allow_space=*/false);
  }

  bool arguments_byte(uint8_t byte) {
    if (!p_->gemma) {
      if (!grammar_.feed(byte)) return die();
    } else {
      json_.clear();
      if (!reader_.push(static_cast<char>(byte), json_) || !grammar_.feed(json_)) return die();
      if (!reader_.held().empty() && !string_can_go_on()) return die();
      if (reader_.complete() && !grammar_.complete()) return die();
    }
    if (grammar_.complete()) {
      phase_ = kSuffix;
      matched_ = 0;
    }
    return true;
  }

  // With bytes held that may begin the closing delimiter, the string must be able to either take
  // them as text or close.
  bool string_can_go_on() const {
    GrammarState as_text = grammar_;
    std::string text;
    chat::append_json_escaped(text, reader_.held());
    if (as_text.feed(text)) return true;
    GrammarState closed = grammar_;
    return closed.feed('"');
  }

  const CallProgram* p_;
  Phase phase_ = kStart;
  const LiteralTrie* trie_ = nullptr;
  int32_t node_ = 0;
  size_t matched_ = 0;  // bytes of the suffix or of the reasoning close marker
  int calls_ = 0;
  bool reasoned_ = false;
  GrammarState grammar_;
  chat::GemmaArgumentReader reader_;
  std::string json_;  // scratch: the reader's output for one byte
};

class ToolCallConstraint final : public WalkedConstraint<CallState> {
 public:
  ToolCallConstraint(std::unique_ptr<CallProgram> program, std::shared_ptr<const TokenIndex> index)
      : WalkedConstraint(std::move(index), CallState(program.get())),
        program_(std::move(program)) {}

 private:
  void compute_allowed() override {
    const TokenWalk* walk = &index_->all;
    if (state_.free_reasoning()) {
      for (int32_t id = 0; id < index_->n_vocab; ++id) {
        if (!index_->bytes[id].empty() && !index_->has_angle[id]) allowed_[id] = 1;
      }
      walk = &index_->with_angle;
    } else if (const int64_t budget = state_.plain_string_budget(); budget >= 0) {
      const bool gemma = program_->gemma;
      for (int32_t id = 0; id < index_->n_vocab; ++id) {
        const int32_t chars = index_->plain_chars[id];
        if (chars > 0 && chars <= budget && !(gemma && index_->has_angle[id])) allowed_[id] = 1;
      }
      walk = gemma ? &index_->not_plain_or_angle : &index_->not_plain;
    }
    levels_[0] = state_;
    walk_tokens(*index_, *walk, levels_, allowed_);
  }

  std::unique_ptr<CallProgram> program_;  // the states point into it
};

// The function's parameters as the schema of an object (a missing schema takes no arguments).
util::Result<Grammar> arguments_grammar(const ToolFunction& f) {
  nlohmann::ordered_json schema = f.parameters;
  if (schema.is_null())
    schema = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
  if (!schema.is_object()) return util::errorf("parameters must be a JSON schema object");
  if (!schema.contains("type")) schema["type"] = "object";
  if (schema["type"] != "object") {
    return util::errorf("parameters must describe an object (\"type\": \"object\"), got type {}",
                        schema["type"].dump());
  }
  return compile_json_schema(schema);
}

}  // namespace

int32_t marker_token(const tokenizer::Tokenizer& tokenizer, std::string_view marker) {
  if (marker.empty()) return -1;
  const auto ids = tokenizer.encode(marker, {.add_bos = false, .parse_special = true});
  return ids.size() == 1 && tokenizer.piece(ids[0], true) == marker ? ids[0] : -1;
}

util::Result<std::unique_ptr<Constraint>> compile_tool_calls(
    const ToolCallSpec& spec, const tokenizer::Tokenizer& tokenizer) {
  if (spec.syntax == chat::ToolSyntax::kNone) {
    return util::errorf(
        "the chat template declares no tool-call syntax that calls can be constrained to");
  }
  if (spec.functions.empty()) return util::errorf("no function to call");
  auto program = std::make_unique<CallProgram>();
  program->n_functions = static_cast<int32_t>(spec.functions.size());
  for (int32_t i = 0; i < program->n_functions; ++i) {
    const ToolFunction& f = spec.functions[i];
    auto grammar = arguments_grammar(f);
    if (!grammar) return grammar.error().with_context(fmt::format("function '{}'", f.name));
    program->grammars.push_back(std::make_unique<Grammar>(std::move(*grammar)));
    const chat::CallText text = chat::call_text(spec.syntax, f.name);
    program->first.add(text.prefix, i);
    program->reasoning.add(text.prefix, i);
    program->next.add(text.separator + text.prefix, i);
    program->suffix = text.suffix;
    program->gemma = text.gemma_arguments;
    program->max_calls = spec.parallel ? text.max_calls : 1;
  }
  if (!spec.reasoning.empty()) {
    program->with_reasoning = true;
    program->reasoning.add(spec.reasoning.open, program->n_functions);
    program->reasoning_close = spec.reasoning.close;
  }
  TokenIndexOptions options{.user_defined = true};
  if (const int32_t end = marker_token(tokenizer, chat::calls_end_marker(spec.syntax)); end >= 0) {
    options.extra_end_ids.push_back(end);
  }
  return std::unique_ptr<Constraint>(std::make_unique<ToolCallConstraint>(
      std::move(program), shared_token_index(tokenizer, options)));
}

}  // namespace sample
