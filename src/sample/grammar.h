// sample::Grammar — a JSON value grammar compiled from a schema, run as a pushdown automaton over
// bytes. A GrammarState is a set of stacks (alternatives still alive, for anyOf); feeding a byte
// advances every stack and drops those that cannot take it. Every live state can still reach a
// complete document, so a constraint built on it never leaves the sampler without a token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sample/regex.h"

namespace sample {

// Whitespace between JSON tokens: none, one space, or a newline followed by at most
// kMaxIndent spaces or tabs (llama.cpp's rule). Bounded, so generation cannot loop on it.
inline constexpr int kMaxIndent = 20;

// A byte trie of literal texts (serialized enum values, property keys).
struct LiteralTrie {
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t terminal = -1;                              // index of the literal ending here
    std::vector<int32_t> below;                         // sorted indices of literals at or under here
  };
  std::vector<Node> nodes{1};
  void add(std::string_view text, int32_t index);
  int32_t child(int32_t node, uint8_t byte) const;
  // Whether a literal with index in [lo, hi] ends at or under `node`.
  bool has_between(int32_t node, int32_t lo, int32_t hi) const;
};

struct GrammarNode {
  enum Kind { kAlt, kLiteral, kString, kNumber, kObject, kArray } kind;
  // kAlt: alternatives (never kAlt themselves after flattening).
  std::vector<int32_t> alternatives;
  // kLiteral: the serialized values.
  LiteralTrie literals;
  // kString: length bounds in code points, an optional regex (pattern / format; no escapes then),
  // and for additional-property keys the declared keys it must not equal (a LiteralTrie of their
  // serialized forms, no escapes then either).
  int64_t min_length = 0, max_length = -1;
  int32_t regex = -1;
  bool allow_escapes = true;
  int32_t exclude_keys = -1;  // a kObject node whose declared keys are excluded
  // kNumber
  bool integer = false;
  bool has_min = false, has_max = false;
  int64_t min = 0, max = 0;  // inclusive, integers only
  // kObject: declared properties in order (the generated order), then additional ones.
  struct Property {
    std::string key;  // serialized, with quotes
    int32_t value;
    bool required;
  };
  std::vector<Property> properties;
  LiteralTrie keys;               // over Property::key, index = property index
  std::vector<int32_t> next_required;  // per property index i: first required index ≥ i (or size)
  int32_t additional = -1;        // value node of additional properties, -1: none allowed
  int32_t additional_key = -1;    // kString node for their keys
  // kArray
  int32_t items = -1;
  int64_t min_items = 0, max_items = -1;
};

struct Grammar {
  std::vector<GrammarNode> nodes;
  std::vector<Regex> regexes;
  int32_t root = -1;
  // Fills kObject::next_required and checks that no kAlt reaches itself without consuming a byte.
  util::Status finalize();
};

struct Frame {
  int32_t node = 0;
  int32_t a = 0;   // literal: trie node; string: code points so far; object: next property; array: items
  int32_t b = 0;   // string: regex state; object: key trie node
  int32_t c = -1;  // string: excluded-key trie node (-1: diverged); object: value node of the key
  int64_t v = 0;   // string: partial code point; number: magnitude so far
  uint8_t phase = 0;
  uint8_t ws = 0;       // whitespace run state (0 none, 1 space, 2 + k: newline and k indents)
  uint8_t pending = 0;  // string: UTF-8 continuation bytes (or \u hex digits) still expected
  uint8_t cont_lo = 0x80, cont_hi = 0xBF;  // string: range of the next UTF-8 continuation byte
  uint8_t flags = 0;    // number: negative, saturated; string: in \u escape
  bool operator==(const Frame&) const = default;
};

using Stack = std::vector<Frame>;

class GrammarState {
 public:
  explicit GrammarState(const Grammar* grammar);
  // Advances by one byte; returns false (and leaves no stacks) when the byte is not allowed.
  bool feed(uint8_t byte);
  bool feed(std::string_view bytes);
  bool dead() const { return stacks_.empty(); }
  // Whether the bytes so far form a complete document (possibly extensible, like a number).
  bool complete() const;
  // Inside a string with no regex and no pending escape or UTF-8 sequence, in a single stack:
  // then any run of whole plain characters (no " \ or controls) up to the returned budget of code
  // points is allowed. -1 otherwise; INT32_MAX when unbounded.
  int64_t plain_string_budget() const;
  void assign(const GrammarState& other) { stacks_ = other.stacks_; }
  // Advances `from` by `byte` into this state (no allocation once capacities have grown).
  bool feed_from(const GrammarState& from, uint8_t byte);

 private:
  void step(Stack stack, uint8_t byte, std::vector<Stack>& out) const;
  bool consume(Stack& stack, uint8_t byte, std::vector<Stack>& out) const;
  void push_value(Stack stack, int32_t node, uint8_t byte, std::vector<Stack>& out) const;
  void pop_and_feed(Stack stack, uint8_t byte, std::vector<Stack>& out) const;
  void finish_child(Stack& stack) const;

  const Grammar* g_;
  std::vector<Stack> stacks_;
  std::vector<Stack> scratch_;
};

}  // namespace sample
