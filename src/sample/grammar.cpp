// The byte-level pushdown automaton behind structured output (see grammar.h).
#include "sample/grammar.h"

#include <algorithm>
#include <climits>
#include <functional>

namespace sample {
namespace {

enum StringPhase : uint8_t { kSOpen, kSBody, kSEscape, kSHex };
enum NumberPhase : uint8_t { kNStart, kNMinus, kNZero, kNInt, kNDot, kNFrac, kNExp, kNExpSign, kNExpDigits };
enum ObjectPhase : uint8_t { kOOpen, kOFirst, kOKey, kOAdditionalKey, kOColon, kOValue, kOInValue, kOAfter, kONext };
enum ArrayPhase : uint8_t { kAOpen, kAFirst, kAInValue, kAAfter, kANext };

constexpr uint8_t kNegative = 1;
constexpr __int128 kSaturated = static_cast<__int128>(1) << 100;

bool accept_whitespace(Frame& f, uint8_t byte) {
  if (byte == ' ') {
    if (f.ws == 0) {
      f.ws = 1;
      return true;
    }
    if (f.ws >= 2 && f.ws - 2 < kMaxIndent) {
      ++f.ws;
      return true;
    }
    return false;
  }
  if (byte == '\t') {
    if (f.ws >= 2 && f.ws - 2 < kMaxIndent) {
      ++f.ws;
      return true;
    }
    return false;
  }
  if (byte == '\n' && f.ws == 0) {
    f.ws = 2;
    return true;
  }
  return false;
}

int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whether an integer with this sign, whose digits so far have magnitude m, can still end inside
// [min, max] (m with more digits appended: m·10^k … m·10^k + 10^k − 1).
bool integer_viable(const GrammarNode& n, bool negative, __int128 m, bool can_extend) {
  const __int128 lo_bound = n.has_min ? n.min : -kSaturated * 4;
  const __int128 hi_bound = n.has_max ? n.max : kSaturated * 4;
  __int128 scale = 1;
  for (int k = 0; k <= 40; ++k) {
    const __int128 base = m * scale;
    const __int128 lo = negative ? -(base + scale - 1) : base;
    const __int128 hi = negative ? -base : base + scale - 1;
    if (lo <= hi_bound && hi >= lo_bound) return true;
    // Past kSaturated no bound can still be met, and 10^k would overflow beyond 10^38.
    if (!can_extend || base > kSaturated || scale > kSaturated) break;
    scale *= 10;
  }
  return false;
}

bool number_in_range(const GrammarNode& n, const Frame& f) {
  if (!n.has_min && !n.has_max) return true;
  const __int128 value = (f.flags & kNegative) ? -static_cast<__int128>(f.v) : static_cast<__int128>(f.v);
  return (!n.has_min || value >= n.min) && (!n.has_max || value <= n.max);
}

bool number_terminal(const Frame& f) {
  return f.phase == kNZero || f.phase == kNInt || f.phase == kNFrac || f.phase == kNExpDigits;
}

}  // namespace

void LiteralTrie::add(std::string_view text, int32_t index) {
  int32_t node = 0;
  nodes[0].below.push_back(index);
  for (char ch : text) {
    const auto byte = static_cast<uint8_t>(ch);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes.size());
      nodes.emplace_back();
      auto& kids = nodes[node].children;
      kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(byte, int32_t{-1})), {byte, next});
    }
    node = next;
    nodes[node].below.push_back(index);
  }
  nodes[node].terminal = index;
}

int32_t LiteralTrie::child(int32_t node, uint8_t byte) const {
  for (const auto& [b, next] : nodes[node].children) {
    if (b == byte) return next;
  }
  return -1;
}

bool LiteralTrie::has_between(int32_t node, int32_t lo, int32_t hi) const {
  const auto& below = nodes[node].below;  // indices are added in increasing order
  auto it = std::lower_bound(below.begin(), below.end(), lo);
  return it != below.end() && *it <= hi;
}

util::Status Grammar::finalize() {
  for (auto& n : nodes) {
    if (n.kind != GrammarNode::kObject) continue;
    const auto count = static_cast<int32_t>(n.properties.size());
    n.next_required.assign(n.properties.size() + 1, count);
    for (int32_t i = count - 1; i >= 0; --i) n.next_required[i] = n.properties[i].required ? i : n.next_required[i + 1];
  }
  // Flatten alternatives of alternatives; an alternative that reaches itself never consumes a byte.
  std::vector<int> visiting(nodes.size(), 0);
  std::vector<std::vector<int32_t>> flat(nodes.size());
  std::function<util::Status(int32_t)> flatten = [&](int32_t id) -> util::Status {
    if (visiting[id] == 2) return {};
    if (visiting[id] == 1) return util::errorf("a $ref cycle that consumes no input (left recursion) is not supported");
    visiting[id] = 1;
    for (int32_t alt : nodes[id].alternatives) {
      if (nodes[alt].kind == GrammarNode::kAlt) {
        HR_TRY(flatten(alt));
        flat[id].insert(flat[id].end(), flat[alt].begin(), flat[alt].end());
      } else {
        flat[id].push_back(alt);
      }
    }
    visiting[id] = 2;
    return {};
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].kind == GrammarNode::kAlt) HR_TRY(flatten(static_cast<int32_t>(i)));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].kind != GrammarNode::kAlt) continue;
    auto& f = flat[i];
    std::sort(f.begin(), f.end());
    f.erase(std::unique(f.begin(), f.end()), f.end());
    if (f.empty()) return util::errorf("an anyOf with no alternatives matches nothing");
    nodes[i].alternatives = f;
  }
  return {};
}

GrammarState::GrammarState(const Grammar* grammar) : g_(grammar) {
  Frame root;
  root.node = grammar->root;
  const GrammarNode& n = grammar->nodes[grammar->root];
  if (n.kind == GrammarNode::kAlt) {
    for (int32_t alt : n.alternatives) {
      root.node = alt;
      stacks_.push_back({root});
    }
  } else {
    stacks_.push_back({root});
  }
}

bool GrammarState::feed(uint8_t byte) {
  scratch_.clear();
  for (const Stack& s : stacks_) step(Stack(s), byte, scratch_);
  std::swap(stacks_, scratch_);
  // Alternatives that converge are kept once.
  for (size_t i = 1; i < stacks_.size();) {
    if (std::find(stacks_.begin(), stacks_.begin() + static_cast<std::ptrdiff_t>(i), stacks_[i]) !=
        stacks_.begin() + static_cast<std::ptrdiff_t>(i)) {
      stacks_.erase(stacks_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  return !stacks_.empty();
}

bool GrammarState::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (!feed(static_cast<uint8_t>(c))) return false;
  }
  return true;
}

bool GrammarState::feed_from(const GrammarState& from, uint8_t byte) {
  stacks_ = from.stacks_;
  return feed(byte);
}

bool GrammarState::complete() const {
  for (const Stack& s : stacks_) {
    if (s.empty()) return true;
    if (s.size() != 1) continue;
    const Frame& f = s[0];
    const GrammarNode& n = g_->nodes[f.node];
    if (n.kind == GrammarNode::kNumber && number_terminal(f) && number_in_range(n, f)) return true;
    if (n.kind == GrammarNode::kLiteral && n.literals.nodes[f.a].terminal >= 0) return true;
  }
  return false;
}

int64_t GrammarState::plain_string_budget() const {
  if (stacks_.size() != 1 || stacks_[0].empty()) return -1;
  const Frame& f = stacks_[0].back();
  const GrammarNode& n = g_->nodes[f.node];
  if (n.kind != GrammarNode::kString || f.phase != kSBody || f.pending != 0 || n.regex >= 0 || f.c >= 0) return -1;
  return n.max_length < 0 ? INT32_MAX : n.max_length - f.a;
}

void GrammarState::finish_child(Stack& stack) const {
  Frame& parent = stack.back();
  parent.ws = 0;
  const GrammarNode& n = g_->nodes[parent.node];
  if (n.kind == GrammarNode::kObject) {
    if (parent.phase == kOAdditionalKey) {
      parent.phase = kOColon;
      parent.c = n.additional;
    } else {
      parent.phase = kOAfter;
    }
  } else {  // kArray
    parent.phase = kAAfter;
    ++parent.a;
  }
}

void GrammarState::pop_and_feed(Stack stack, uint8_t byte, std::vector<Stack>& out) const {
  stack.pop_back();
  if (stack.empty()) return;  // a complete document takes no more bytes
  finish_child(stack);
  step(std::move(stack), byte, out);
}

void GrammarState::push_value(Stack stack, int32_t node, uint8_t byte, std::vector<Stack>& out) const {
  const GrammarNode& n = g_->nodes[node];
  Frame child;
  if (n.kind != GrammarNode::kAlt) {
    child.node = node;
    stack.push_back(child);
    step(std::move(stack), byte, out);
    return;
  }
  for (int32_t alt : n.alternatives) {
    Stack s = stack;
    child.node = alt;
    s.push_back(child);
    step(std::move(s), byte, out);
  }
}

void GrammarState::step(Stack stack, uint8_t byte, std::vector<Stack>& out) const {
  if (stack.empty()) return;
  consume(stack, byte, out);
}

// Consumes `byte` at the top frame, appending every resulting stack to `out`.
bool GrammarState::consume(Stack& stack, uint8_t byte, std::vector<Stack>& out) const {
  Frame& f = stack.back();
  const GrammarNode& n = g_->nodes[f.node];
  auto done = [&] {  // the top value is complete and can take nothing more
    stack.pop_back();
    if (!stack.empty()) finish_child(stack);
    out.push_back(std::move(stack));
    return true;
  };
  auto keep = [&] {
    out.push_back(std::move(stack));
    return true;
  };

  switch (n.kind) {
    case GrammarNode::kAlt:
      return false;  // flattened away before a frame is pushed

    case GrammarNode::kLiteral: {
      const int32_t next = n.literals.child(f.a, byte);
      if (next >= 0) {
        f.a = next;
        const auto& node = n.literals.nodes[next];
        return node.terminal >= 0 && node.children.empty() ? done() : keep();
      }
      if (n.literals.nodes[f.a].terminal >= 0) pop_and_feed(std::move(stack), byte, out);
      return false;
    }

    case GrammarNode::kNumber: {
      const bool tracked = n.has_min || n.has_max;
      const bool digit = byte >= '0' && byte <= '9';
      auto add_digit = [&](uint8_t next_phase) {
        if (tracked) {
          const __int128 m = std::min<__int128>(static_cast<__int128>(f.v) * 10 + (byte - '0'), kSaturated);
          if (!integer_viable(n, f.flags & kNegative, m, m != 0)) return false;
          f.v = static_cast<int64_t>(std::min<__int128>(m, INT64_MAX));
        }
        f.phase = next_phase;
        return keep();
      };
      switch (f.phase) {
        case kNStart:
          if (byte == '-') {
            if (tracked && !integer_viable(n, true, 0, true)) return false;
            f.phase = kNMinus;
            f.flags |= kNegative;
            return keep();
          }
          [[fallthrough]];
        case kNMinus:
          if (digit) return add_digit(byte == '0' ? kNZero : kNInt);
          return false;
        case kNInt:
          if (digit) return add_digit(kNInt);
          [[fallthrough]];
        case kNZero:
          if (!n.integer && byte == '.') {
            f.phase = kNDot;
            return keep();
          }
          if (!n.integer && (byte == 'e' || byte == 'E')) {
            f.phase = kNExp;
            return keep();
          }
          break;
        case kNDot:
        case kNFrac:
          if (digit) {
            f.phase = kNFrac;
            return keep();
          }
          if (f.phase == kNFrac && (byte == 'e' || byte == 'E')) {
            f.phase = kNExp;
            return keep();
          }
          break;
        case kNExp:
          if (byte == '+' || byte == '-') {
            f.phase = kNExpSign;
            return keep();
          }
          [[fallthrough]];
        case kNExpSign:
        case kNExpDigits:
          if (digit) {
            f.phase = kNExpDigits;
            return keep();
          }
          break;
      }
      if (number_terminal(f) && number_in_range(n, f)) pop_and_feed(std::move(stack), byte, out);
      return false;
    }

    case GrammarNode::kString: {
      const bool counted = n.max_length >= 0;
      auto advance_exclusion = [&] {
        if (f.c >= 0) f.c = g_->nodes[n.exclude_keys].keys.child(f.c, byte);
      };
      switch (f.phase) {
        case kSOpen:
          if (byte != '"') return false;
          f.phase = kSBody;
          f.b = n.regex >= 0 ? g_->regexes[n.regex].start() : 0;
          f.c = n.exclude_keys >= 0 ? g_->nodes[n.exclude_keys].keys.child(0, byte) : -1;
          return keep();
        case kSBody: {
          if (f.pending > 0) {
            if (byte < f.cont_lo || byte > f.cont_hi) return false;
            f.v = (f.v << 6) | (byte & 0x3F);
            --f.pending;
            f.cont_lo = 0x80;
            f.cont_hi = 0xBF;
            if (n.regex >= 0) {
              const Regex& re = g_->regexes[n.regex];
              if (f.pending == 0) {
                f.b = re.step(f.b, static_cast<uint32_t>(f.v));
                if (f.b < 0) return false;
              } else {
                const int shift = 6 * f.pending;
                const auto lo = static_cast<uint32_t>(f.v << shift);
                if (!re.any_in(f.b, lo, lo | ((1u << shift) - 1))) return false;
              }
            }
            advance_exclusion();
            return keep();
          }
          if (byte == '"') {
            if (f.a < n.min_length) return false;
            if (n.regex >= 0 && !g_->regexes[n.regex].accepting(f.b)) return false;
            if (f.c >= 0) {
              const int32_t end = g_->nodes[n.exclude_keys].keys.child(f.c, byte);
              if (end >= 0 && g_->nodes[n.exclude_keys].keys.nodes[end].terminal >= 0) return false;
            }
            return done();
          }
          if (byte < 0x20) return false;
          if (counted && f.a >= n.max_length) return false;
          if (byte == '\\') {
            if (!n.allow_escapes) return false;
            f.phase = kSEscape;
            return keep();
          }
          int extra;
          uint8_t lo = 0x80, hi = 0xBF;
          if (byte < 0x80) {
            extra = 0;
          } else if (byte >= 0xC2 && byte <= 0xDF) {
            extra = 1;
          } else if (byte >= 0xE0 && byte <= 0xEF) {
            extra = 2;
            if (byte == 0xE0) lo = 0xA0;
            if (byte == 0xED) hi = 0x9F;  // no surrogates
          } else if (byte >= 0xF0 && byte <= 0xF4) {
            extra = 3;
            if (byte == 0xF0) lo = 0x90;
            if (byte == 0xF4) hi = 0x8F;
          } else {
            return false;
          }
          ++f.a;
          if (extra == 0) {
            if (n.regex >= 0) {
              f.b = g_->regexes[n.regex].step(f.b, byte);
              if (f.b < 0) return false;
            }
          } else {
            f.v = byte & (0x3F >> extra);
            f.pending = static_cast<uint8_t>(extra);
            f.cont_lo = lo;
            f.cont_hi = hi;
            if (n.regex >= 0) {
              const int shift = 6 * (extra - 1);
              const auto first = static_cast<uint32_t>(((f.v << 6) | (lo & 0x3F)) << shift);
              const auto last = static_cast<uint32_t>(((f.v << 6) | (hi & 0x3F)) << shift) | ((1u << shift) - 1);
              if (!g_->regexes[n.regex].any_in(f.b, first, last)) return false;
            }
          }
          advance_exclusion();
          return keep();
        }
        case kSEscape:
          if (byte == 'u') {
            f.phase = kSHex;
            f.pending = 4;
            f.v = 0;
            return keep();
          }
          if (std::string_view("\"\\/bfnrt").find(static_cast<char>(byte)) == std::string_view::npos) return false;
          f.phase = kSBody;
          ++f.a;
          return keep();
        case kSHex: {
          const int h = hex_value(byte);
          if (h < 0) return false;
          f.v = f.v * 16 + h;
          --f.pending;
          if (f.pending == 2 && f.v >= 0xD8 && f.v <= 0xDF) return false;  // lone surrogates
          if (f.pending == 0) {
            f.phase = kSBody;
            ++f.a;
          }
          return keep();
        }
      }
      return false;
    }

    case GrammarNode::kObject: {
      const auto count = static_cast<int32_t>(n.properties.size());
      const bool can_close = n.next_required[std::min(f.a, count)] == count;
      const bool additional_ok = n.additional >= 0 && can_close;
      auto start_key = [&] {
        bool any = false;
        if (f.a < count) {
          const int32_t next = n.keys.child(0, byte);
          const int32_t last = std::min(n.next_required[f.a], count - 1);
          if (next >= 0 && n.keys.has_between(next, f.a, last)) {
            Stack s = stack;
            s.back().phase = kOKey;
            s.back().b = next;
            s.back().ws = 0;
            out.push_back(std::move(s));
            any = true;
          }
        }
        if (additional_ok) {
          f.phase = kOAdditionalKey;
          f.a = count;
          f.ws = 0;
          push_value(std::move(stack), n.additional_key, byte, out);
          any = true;
        }
        return any;
      };
      switch (f.phase) {
        case kOOpen:
          if (byte != '{') return false;
          f.phase = kOFirst;
          return keep();
        case kOFirst:
        case kONext:
          if (accept_whitespace(f, byte)) return keep();
          if (byte == '"') return start_key();
          if (byte == '}' && f.phase == kOFirst && can_close) return done();
          return false;
        case kOKey: {
          const int32_t next = n.keys.child(f.b, byte);
          const int32_t last = std::min(n.next_required[f.a], count - 1);
          if (next < 0 || !n.keys.has_between(next, f.a, last)) return false;
          f.b = next;
          const int32_t index = n.keys.nodes[next].terminal;
          if (index >= 0) {
            f.phase = kOColon;
            f.c = n.properties[index].value;
            f.a = index + 1;
          }
          return keep();
        }
        case kOColon:
          if (accept_whitespace(f, byte)) return keep();
          if (byte != ':') return false;
          f.phase = kOValue;
          f.ws = 0;
          return keep();
        case kOValue: {
          if (accept_whitespace(f, byte)) return keep();
          f.phase = kOInValue;
          const int32_t value = f.c;
          push_value(std::move(stack), value, byte, out);
          return true;
        }
        case kOAfter:
          if (accept_whitespace(f, byte)) return keep();
          if (byte == ',' && (f.a < count || additional_ok)) {
            f.phase = kONext;
            f.ws = 0;
            return keep();
          }
          if (byte == '}' && can_close) return done();
          return false;
        default:
          return false;  // a child frame is on top while waiting
      }
    }

    case GrammarNode::kArray:
      switch (f.phase) {
        case kAOpen:
          if (byte != '[') return false;
          f.phase = kAFirst;
          return keep();
        case kAFirst:
        case kANext:
          if (accept_whitespace(f, byte)) return keep();
          if (f.phase == kAFirst && byte == ']') {
            if (n.min_items > 0) return false;
            return done();
          }
          if (f.phase == kAFirst && n.max_items == 0) return false;
          f.phase = kAInValue;
          push_value(std::move(stack), n.items, byte, out);
          return true;
        case kAAfter:
          if (accept_whitespace(f, byte)) return keep();
          if (byte == ',' && (n.max_items < 0 || f.a < n.max_items)) {
            f.phase = kANext;
            f.ws = 0;
            return keep();
          }
          if (byte == ']' && f.a >= n.min_items) return done();
          return false;
        default:
          return false;
      }
  }
  return false;
}

}  // namespace sample
