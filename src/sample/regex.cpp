// Regex subset → Thompson NFA → DFA over code point classes, trimmed to live states.
#include "sample/regex.h"

#include <algorithm>
#include <map>
#include <memory>

namespace sample {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr size_t kMaxNfaStates = 20000;
constexpr size_t kMaxDfaStates = 4000;
constexpr int kMaxRepeat = 1000;

struct Range {
  uint32_t lo, hi;
};
using Set = std::vector<Range>;

Set normalized(Set s) {
  std::sort(s.begin(), s.end(), [](Range a, Range b) { return a.lo < b.lo; });
  Set out;
  for (Range r : s) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

Set complement(const Set& s, uint32_t max) {
  Set out;
  uint32_t next = 0;
  for (Range r : normalized(s)) {
    if (r.lo > max) break;
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= max) out.push_back({next, max});
  return out;
}

Set intersect(const Set& a, const Set& b) {
  Set out;
  for (Range x : a) {
    for (Range y : b) {
      const uint32_t lo = std::max(x.lo, y.lo), hi = std::min(x.hi, y.hi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  }
  return normalized(out);
}

// What a JSON string may hold unescaped, minus the surrogates UTF-8 cannot encode.
const Set& json_alphabet() {
  static const Set s = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, kMaxCodePoint}};
  return s;
}

struct Ast {
  enum Kind { kSet, kCat, kAlt, kRepeat } kind;
  Set set;
  std::vector<std::unique_ptr<Ast>> kids;
  int min = 0, max = 0;  // kRepeat; max -1: unbounded
};
using AstPtr = std::unique_ptr<Ast>;

AstPtr make(Ast::Kind kind) {
  auto a = std::make_unique<Ast>();
  a->kind = kind;
  return a;
}

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  util::Result<AstPtr> parse_all() {
    HR_ASSIGN_OR_RETURN(AstPtr a, parse_alt());
    if (pos_ < p_.size()) return error("unbalanced ')'");
    return a;
  }

 private:
  util::Error error(std::string_view what) const {
    return util::errorf("pattern feature {} at offset {} is not supported", what, pos_);
  }
  bool at_end() const { return pos_ >= p_.size(); }
  char peek() const { return p_[pos_]; }

  uint32_t next_code_point() {
    const auto b = static_cast<unsigned char>(p_[pos_++]);
    int extra = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
    uint32_t cp = extra == 0 ? b : b & (0x3F >> extra);
    for (; extra > 0 && pos_ < p_.size(); --extra) cp = (cp << 6) | (static_cast<unsigned char>(p_[pos_++]) & 0x3F);
    return cp;
  }

  util::Result<AstPtr> parse_alt() {
    auto alt = make(Ast::kAlt);
    HR_ASSIGN_OR_RETURN(AstPtr first, parse_cat());
    alt->kids.push_back(std::move(first));
    while (!at_end() && peek() == '|') {
      ++pos_;
      HR_ASSIGN_OR_RETURN(AstPtr next, parse_cat());
      alt->kids.push_back(std::move(next));
    }
    if (alt->kids.size() == 1) return std::move(alt->kids[0]);
    return alt;
  }

  util::Result<AstPtr> parse_cat() {
    auto cat = make(Ast::kCat);
    while (!at_end() && peek() != '|' && peek() != ')') {
      HR_ASSIGN_OR_RETURN(AstPtr atom, parse_atom());
      HR_ASSIGN_OR_RETURN(atom, parse_quantifiers(std::move(atom)));
      cat->kids.push_back(std::move(atom));
    }
    return cat;
  }

  util::Result<int> parse_int() {
    size_t start = pos_;
    int v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepeat) return error("'repeat count over 1000'");
      ++pos_;
    }
    if (pos_ == start) return -1;
    return v;
  }

  util::Result<AstPtr> parse_quantifiers(AstPtr atom) {
    while (!at_end()) {
      int min = 0, max = -1;
      const char c = peek();
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        min = 1;
      } else if (c == '?') {
        ++pos_;
        max = 1;
      } else if (c == '{') {
        const size_t open = pos_++;
        HR_ASSIGN_OR_RETURN(min, parse_int());
        if (min < 0) {
          pos_ = open;
          return error("'{' without a count");
        }
        max = min;
        if (!at_end() && peek() == ',') {
          ++pos_;
          HR_ASSIGN_OR_RETURN(max, parse_int());
        }
        if (at_end() || peek() != '}') return error("'{' without a closing '}'");
        ++pos_;
        if (max >= 0 && max < min) return error("'{n,m}' with m < n");
      } else {
        break;
      }
      // A lazy quantifier matches the same strings; only the match position differs.
      if (!at_end() && peek() == '?') ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '*' || peek() == '{')) return error("'nested quantifier'");
      auto rep = make(Ast::kRepeat);
      rep->min = min;
      rep->max = max;
      rep->kids.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  static Set shorthand(char c) {
    switch (c) {
      case 'd': return {{'0', '9'}};
      case 'w': return normalized({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}});
      case 's': return {{'\t', '\r'}, {' ', ' '}};
      case 'D': return complement(shorthand('d'), 0x7F);
      case 'W': return complement(shorthand('w'), 0x7F);
      case 'S': return complement(shorthand('s'), 0x7F);
      default: return {};
    }
  }

  // After a backslash: a single character, or a shorthand class (is_class set).
  util::Result<Set> parse_escape(bool& is_class) {
    if (at_end()) return error("'trailing backslash'");
    const char c = p_[pos_++];
    is_class = false;
    if (std::string_view("dwsDWS").find(c) != std::string_view::npos) {
      is_class = true;
      return shorthand(c);
    }
    uint32_t cp;
    switch (c) {
      case 'n': cp = '\n'; break;
      case 't': cp = '\t'; break;
      case 'r': cp = '\r'; break;
      case 'f': cp = '\f'; break;
      case 'v': cp = '\v'; break;
      case 'x':
      case 'u': {
        const int digits = c == 'x' ? 2 : 4;
        if (pos_ + digits > p_.size()) return error("'truncated \\x or \\u escape'");
        cp = 0;
        for (int i = 0; i < digits; ++i) {
          const char h = p_[pos_++];
          const int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (v < 0) return error("'bad hex digit in escape'");
          cp = cp * 16 + static_cast<uint32_t>(v);
        }
        break;
      }
      default:
        if (std::string_view(".\\/-[](){}*+?|^$ \"'#&~,:;<=>!@%`_").find(c) == std::string_view::npos) {
          --pos_;
          return error(fmt::format("'\\{}'", c));
        }
        cp = static_cast<unsigned char>(c);
    }
    return Set{{cp, cp}};
  }

  util::Result<Set> parse_class() {
    bool negated = false;
    if (!at_end() && peek() == '^') {
      negated = true;
      ++pos_;
    }
    Set set;
    bool first = true;
    while (true) {
      if (at_end()) return error("'[' without a closing ']'");
      if (peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (p_.substr(pos_, 2) == "[:" || p_.substr(pos_, 2) == "[=" || p_.substr(pos_, 2) == "[.") return error("'POSIX class'");
      uint32_t lo;
      if (peek() == '\\') {
        ++pos_;
        bool is_class;
        HR_ASSIGN_OR_RETURN(Set e, parse_escape(is_class));
        if (is_class) {
          if (negated) return error("'shorthand class inside [^...]'");
          set.insert(set.end(), e.begin(), e.end());
          continue;
        }
        lo = e[0].lo;
      } else {
        lo = next_code_point();
      }
      uint32_t hi = lo;
      if (pos_ + 1 < p_.size() && peek() == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        if (peek() == '\\') {
          ++pos_;
          bool is_class;
          HR_ASSIGN_OR_RETURN(Set e, parse_escape(is_class));
          if (is_class) return error("'class shorthand as a range end'");
          hi = e[0].lo;
        } else {
          hi = next_code_point();
        }
        if (hi < lo) return error("'reversed range in class'");
      }
      set.push_back({lo, hi});
    }
    return negated ? complement(set, kMaxCodePoint) : normalized(set);
  }

  util::Result<AstPtr> parse_atom() {
    const char c = peek();
    auto leaf = make(Ast::kSet);
    switch (c) {
      case '(': {
        ++pos_;
        if (!at_end() && peek() == '?') {
          if (p_.substr(pos_, 2) != "?:") return error("'(?...)' (lookaround, named group or flags)");
          pos_ += 2;
        }
        HR_ASSIGN_OR_RETURN(AstPtr inner, parse_alt());
        if (at_end() || peek() != ')') return error("'(' without a closing ')'");
        ++pos_;
        return inner;
      }
      case '[': {
        ++pos_;
        HR_ASSIGN_OR_RETURN(leaf->set, parse_class());
        return leaf;
      }
      case '.':
        ++pos_;
        leaf->set = complement({{'\n', '\n'}}, kMaxCodePoint);
        return leaf;
      case '\\': {
        ++pos_;
        bool is_class;
        HR_ASSIGN_OR_RETURN(leaf->set, parse_escape(is_class));
        return leaf;
      }
      case '^':
      case '$':
        return error(fmt::format("'{}' not at the pattern's start or end", c));
      case '*':
      case '+':
      case '?':
      case '{':
        return error(fmt::format("'{}' with nothing to repeat", c));
      default: {
        const uint32_t cp = next_code_point();
        leaf->set = {{cp, cp}};
        return leaf;
      }
    }
  }

  std::string_view p_;
  size_t pos_ = 0;
};

struct Nfa {
  struct State {
    std::vector<int> eps;
    Set set;
    int next = -1;  // target on a code point in set
  };
  std::vector<State> states;

  int add() {
    states.emplace_back();
    return static_cast<int>(states.size()) - 1;
  }
};

struct Fragment {
  int start, end;
};

util::Result<Fragment> build(const Ast& a, Nfa& nfa) {
  if (nfa.states.size() > kMaxNfaStates) return util::errorf("pattern is too large (over {} automaton states)", kMaxNfaStates);
  switch (a.kind) {
    case Ast::kSet: {
      Fragment f{nfa.add(), nfa.add()};
      nfa.states[f.start].set = a.set;
      nfa.states[f.start].next = f.end;
      return f;
    }
    case Ast::kCat: {
      Fragment f{nfa.add(), -1};
      int tail = f.start;
      for (const auto& k : a.kids) {
        HR_ASSIGN_OR_RETURN(Fragment kf, build(*k, nfa));
        nfa.states[tail].eps.push_back(kf.start);
        tail = kf.end;
      }
      f.end = tail;
      return f;
    }
    case Ast::kAlt: {
      Fragment f{nfa.add(), nfa.add()};
      for (const auto& k : a.kids) {
        HR_ASSIGN_OR_RETURN(Fragment kf, build(*k, nfa));
        nfa.states[f.start].eps.push_back(kf.start);
        nfa.states[kf.end].eps.push_back(f.end);
      }
      return f;
    }
    case Ast::kRepeat: {
      Fragment f{nfa.add(), -1};
      int tail = f.start;
      const Ast& kid = *a.kids[0];
      for (int i = 0; i < a.min; ++i) {
        HR_ASSIGN_OR_RETURN(Fragment kf, build(kid, nfa));
        nfa.states[tail].eps.push_back(kf.start);
        tail = kf.end;
      }
      const int end = nfa.add();
      nfa.states[tail].eps.push_back(end);
      if (a.max < 0) {
        HR_ASSIGN_OR_RETURN(Fragment kf, build(kid, nfa));
        nfa.states[tail].eps.push_back(kf.start);
        nfa.states[kf.end].eps.push_back(tail);
      } else {
        for (int i = a.min; i < a.max; ++i) {
          HR_ASSIGN_OR_RETURN(Fragment kf, build(kid, nfa));
          nfa.states[tail].eps.push_back(kf.start);
          nfa.states[kf.end].eps.push_back(end);
          tail = kf.end;
        }
      }
      f.end = end;
      return f;
    }
  }
  return util::errorf("unreachable");
}

std::vector<int> closure(const Nfa& nfa, std::vector<int> states) {
  std::vector<uint8_t> seen(nfa.states.size(), 0);
  std::vector<int> stack = states;
  for (int s : states) seen[s] = 1;
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    for (int t : nfa.states[s].eps) {
      if (!seen[t]) {
        seen[t] = 1;
        states.push_back(t);
        stack.push_back(t);
      }
    }
  }
  std::sort(states.begin(), states.end());
  return states;
}

}  // namespace

util::Result<Regex> Regex::compile(std::string_view pattern, bool search) {
  bool anchored_start = false, anchored_end = false;
  if (!pattern.empty() && pattern.front() == '^') {
    anchored_start = true;
    pattern.remove_prefix(1);
  }
  // A final '$' that is not escaped (an even run of backslashes before it).
  if (!pattern.empty() && pattern.back() == '$') {
    size_t backslashes = 0;
    while (backslashes + 1 < pattern.size() && pattern[pattern.size() - 2 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 0) {
      anchored_end = true;
      pattern.remove_suffix(1);
    }
  }
  Parser parser(pattern);
  HR_ASSIGN_OR_RETURN(AstPtr body, parser.parse_all());
  auto any_star = [] {
    auto rep = make(Ast::kRepeat);
    rep->min = 0;
    rep->max = -1;
    auto any = make(Ast::kSet);
    any->set = {{0, kMaxCodePoint}};
    rep->kids.push_back(std::move(any));
    return rep;
  };
  auto whole = make(Ast::kCat);
  if (search && !anchored_start) whole->kids.push_back(any_star());
  whole->kids.push_back(std::move(body));
  if (search && !anchored_end) whole->kids.push_back(any_star());

  Nfa nfa;
  HR_ASSIGN_OR_RETURN(Fragment f, build(*whole, nfa));
  // Only code points a JSON string can hold unescaped are ever generated.
  std::vector<uint32_t> cuts;
  for (auto& s : nfa.states) {
    s.set = intersect(s.set, json_alphabet());
    for (Range r : s.set) {
      cuts.push_back(r.lo);
      cuts.push_back(r.hi + 1);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());

  Regex re;
  std::map<std::vector<int>, int> ids;
  std::vector<std::vector<int>> sets;
  auto intern = [&](std::vector<int> s) {
    auto [it, inserted] = ids.emplace(s, static_cast<int>(sets.size()));
    if (inserted) sets.push_back(std::move(s));
    return it->second;
  };
  intern(closure(nfa, {f.start}));
  for (size_t d = 0; d < sets.size(); ++d) {
    if (sets.size() > kMaxDfaStates) return util::errorf("pattern is too complex (over {} automaton states)", kMaxDfaStates);
    const std::vector<int> current = sets[d];
    std::vector<Transition> out;
    for (size_t c = 0; c + 1 < cuts.size(); ++c) {
      const uint32_t lo = cuts[c], hi = cuts[c + 1] - 1;
      std::vector<int> targets;
      for (int s : current) {
        for (Range r : nfa.states[s].set) {
          if (r.lo <= lo && lo <= r.hi) targets.push_back(nfa.states[s].next);
        }
      }
      if (targets.empty()) continue;
      const int next = intern(closure(nfa, std::move(targets)));
      if (!out.empty() && out.back().next == next && out.back().hi + 1 == lo) {
        out.back().hi = hi;
      } else {
        out.push_back({lo, hi, next});
      }
    }
    re.transitions_.push_back(std::move(out));
    re.accepting_.push_back(std::binary_search(current.begin(), current.end(), f.end) ? 1 : 0);
  }
  // Keep only transitions into states from which acceptance is reachable.
  std::vector<uint8_t> live(re.accepting_.begin(), re.accepting_.end());
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = 0; s < live.size(); ++s) {
      if (live[s]) continue;
      for (const auto& t : re.transitions_[s]) {
        if (live[t.next]) {
          live[s] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  if (!live[0]) return util::errorf("pattern matches no string that can be written without escapes");
  for (auto& ts : re.transitions_) {
    std::erase_if(ts, [&](const Transition& t) { return !live[t.next]; });
  }
  return re;
}

int32_t Regex::step(int32_t state, uint32_t cp) const {
  for (const auto& t : transitions_[state]) {
    if (cp < t.lo) return -1;
    if (cp <= t.hi) return t.next;
  }
  return -1;
}

bool Regex::any_in(int32_t state, uint32_t lo, uint32_t hi) const {
  for (const auto& t : transitions_[state]) {
    if (t.lo <= hi && lo <= t.hi) return true;
  }
  return false;
}

bool Regex::matches(std::string_view utf8) const {
  int32_t s = start();
  for (size_t i = 0; i < utf8.size() && s >= 0;) {
    const auto b = static_cast<unsigned char>(utf8[i++]);
    int extra = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
    uint32_t cp = extra == 0 ? b : b & (0x3F >> extra);
    for (; extra > 0 && i < utf8.size(); --extra) cp = (cp << 6) | (static_cast<unsigned char>(utf8[i++]) & 0x3F);
    s = step(s, cp);
  }
  return s >= 0 && accepting(s);
}

}  // namespace sample
