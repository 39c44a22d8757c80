// Byte-level BPE word splitting: each tokenizer.json regex as a hand-written matcher.
//
// A regex split keeps every match and every unmatched stretch between matches as pieces, and the
// next regex of the sequence splits each piece on its own (a lookahead or `$` sees the piece's
// end as the end of the text). split_by() does that for a matcher that answers "how long is the
// leftmost-first match starting exactly here"; each matcher below mirrors one regex, with the
// regex quoted above it. \s is the White_Space property, \p{X} a general category, as in the
// Oniguruma/Rust engines the published tokenizers run.
#include "tokenizer/pretokenize.h"

#include <algorithm>
#include <array>
#include <utility>

#include "tokenizer/unicode.h"

namespace tokenizer {
namespace {

// The text as code points with their classes; spans below index code points.
struct Chars {
  std::vector<uint32_t> cp;
  std::vector<uint16_t> flags;
  std::vector<size_t> offset;  // byte offset of each code point, plus the end

  size_t size() const { return cp.size(); }
  bool has(size_t i, uint16_t f) const { return (flags[i] & f) != 0; }
  bool space(size_t i) const { return has(i, kWhitespace); }
  bool letter(size_t i) const { return has(i, kLetter); }
  bool number(size_t i) const { return has(i, kNumber); }
  bool punct(size_t i) const { return has(i, kPunctuation); }
  // [^\s\p{L}\p{N}]
  bool other(size_t i) const { return !has(i, kWhitespace | kLetter | kNumber); }
  bool ascii_digit(size_t i) const { return cp[i] >= '0' && cp[i] <= '9'; }
};

struct Span {
  size_t begin;
  size_t end;
};

template <class Pred>
size_t run_length(size_t i, size_t end, Pred pred) {
  size_t j = i;
  while (j < end && pred(j)) ++j;
  return j - i;
}

template <class Match>
void split_by(const Chars& t, Span piece, std::vector<Span>& out, Match match) {
  size_t gap = piece.begin;
  size_t i = piece.begin;
  while (i < piece.end) {
    size_t n = match(t, i, piece.end);
    if (n == 0) {
      ++i;
      continue;
    }
    if (gap < i) out.push_back({gap, i});
    out.push_back({i, i + n});
    i += n;
    gap = i;
  }
  if (gap < piece.end) out.push_back({gap, piece.end});
}

// `\s?X+` for a class X: one optional whitespace character joins the run it precedes.
template <class Pred>
size_t match_space_then_run(const Chars& t, size_t i, size_t end, Pred pred) {
  if (t.space(i) && i + 1 < end && pred(i + 1)) return 1 + run_length(i + 1, end, pred);
  return run_length(i, end, pred);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (GPT-2's regex; llama.cpp drops the last \s+, which splits the same way.)
size_t match_gpt2(const Chars& t, size_t i, size_t end) {
  const uint32_t c = t.cp[i];
  if (c == '\'' && i + 1 < end) {
    const uint32_t c1 = t.cp[i + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (i + 2 < end) {
      const uint32_t c2 = t.cp[i + 2];
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
        return 3;
    }
  }
  auto run_of_class_at = [&](size_t k) -> size_t {
    if (t.letter(k)) return run_length(k, end, [&](size_t j) { return t.letter(j); });
    if (t.number(k)) return run_length(k, end, [&](size_t j) { return t.number(j); });
    if (t.other(k)) return run_length(k, end, [&](size_t j) { return t.other(j); });
    return 0;
  };
  if (c == ' ' && i + 1 < end) {
    if (size_t n = run_of_class_at(i + 1)) return 1 + n;
  }
  if (size_t n = run_of_class_at(i)) return n;
  // Whitespace: \s+(?!\S) leaves the last space of a run to the word after it; \s+ takes a
  // single space that precedes a non-space.
  size_t n = run_length(i, end, [&](size_t j) { return t.space(j); });
  if (i + n == end) return n;
  return n > 1 ? n - 1 : 1;
}

// [\p{P}\$\+<=>\^~\|`]+   (falcon: HF's Punctuation pre-tokenizer, ASCII symbols included)
size_t match_punct_falcon(const Chars& t, size_t i, size_t end) {
  return run_length(i, end, [&](size_t j) {
    const uint32_t c = t.cp[j];
    return t.punct(j) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
           c == '~' || c == '|' || c == '`';
  });
}

// [\p{P}\$\+<=>\^~\|]+   (llama.cpp's default: the falcon class without the backtick)
size_t match_punct_default(const Chars& t, size_t i, size_t end) {
  return run_length(i, end, [&](size_t j) {
    const uint32_t c = t.cp[j];
    return t.punct(j) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
           c == '~' || c == '|';
  });
}

// [0-9][0-9][0-9]
size_t match_three_digits(const Chars& t, size_t i, size_t end) {
  return i + 3 <= end && t.ascii_digit(i) && t.ascii_digit(i + 1) && t.ascii_digit(i + 2) ? 3 : 0;
}

// \p{N}
size_t match_number(const Chars& t, size_t i, size_t) {
  return t.number(i) ? 1 : 0;
}

// \p{N}+
size_t match_numbers(const Chars& t, size_t i, size_t end) {
  return run_length(i, end, [&](size_t j) { return t.number(j); });
}

// [\r\n]
size_t match_line_break(const Chars& t, size_t i, size_t) {
  return t.cp[i] == '\r' || t.cp[i] == '\n' ? 1 : 0;
}

// \s?\p{L}+
size_t match_space_letters(const Chars& t, size_t i, size_t end) {
  return match_space_then_run(t, i, end, [&](size_t j) { return t.letter(j); });
}

// \s?\p{P}+
size_t match_space_punct(const Chars& t, size_t i, size_t end) {
  return match_space_then_run(t, i, end, [&](size_t j) { return t.punct(j); });
}

// [一-龥ࠀ-一가-퟿]+   (U+4E00–U+9FA5, U+0800–U+4E00, U+AC00–U+D7FF: CJK, Hangul and
// the scripts between, as DeepSeek's tokenizer.json writes it)
size_t match_cjk(const Chars& t, size_t i, size_t end) {
  return run_length(i, end, [&](size_t j) {
    const uint32_t c = t.cp[j];
    return (c >= 0x0800 && c <= 0x9FA5) || (c >= 0xAC00 && c <= 0xD7FF);
  });
}

// The letter class of DeepSeek LLM's second regex (\s?[A-Za-zµÀ-ÖØ-ö...]+): the cased letters
// (L&) of an older Unicode, copied range by range from its tokenizer.json.
constexpr std::array<std::pair<uint32_t, uint32_t>, 87> kDeepseekLetters = {{
    {0x0041, 0x005A},   {0x0061, 0x007A},   {0x00B5, 0x00B5},   {0x00C0, 0x00D6},
    {0x00D8, 0x00F6},   {0x00F8, 0x01BA},   {0x01BC, 0x01BF},   {0x01C4, 0x0293},
    {0x0295, 0x02AF},   {0x0370, 0x0373},   {0x0376, 0x0376},   {0x0377, 0x0377},
    {0x037B, 0x037D},   {0x037F, 0x037F},   {0x0386, 0x0386},   {0x0388, 0x038A},
    {0x038C, 0x038C},   {0x038E, 0x03A1},   {0x03A3, 0x03F5},   {0x03F7, 0x0481},
    {0x048A, 0x052F},   {0x0531, 0x0556},   {0x10A0, 0x10C5},   {0x13A0, 0x13F5},
    {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},
    {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},
    {0x1FB6, 0x1FBC},   {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},
    {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},
    {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},
    {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},
    {0x213C, 0x213F},   {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2183},
    {0x2184, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF2},   {0x2CF3, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},
    {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},
    {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},
    {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
    {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
}};

bool deepseek_letter(uint32_t c) {
  auto it = std::upper_bound(kDeepseekLetters.begin(), kDeepseekLetters.end(), c,
                             [](uint32_t v, const auto& r) { return v < r.first; });
  return it != kDeepseekLetters.begin() && c <= (it - 1)->second;
}

// \s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+
size_t match_deepseek_letters(const Chars& t, size_t i, size_t end) {
  return match_space_then_run(t, i, end, [&](size_t j) { return deepseek_letter(t.cp[j]); });
}

// \s?[!-/:-~！-／：-～‘-‟　-。]+
size_t match_deepseek_punct(const Chars& t, size_t i, size_t end) {
  return match_space_then_run(t, i, end, [&](size_t j) {
    const uint32_t c = t.cp[j];
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x7E) || (c >= 0xFF01 && c <= 0xFF0F) ||
           (c >= 0xFF1A && c <= 0xFF5E) || (c >= 0x2018 && c <= 0x201F) ||
           (c >= 0x3000 && c <= 0x3002);
  });
}

// \s+$ : only the whitespace run that reaches the piece's end matches, so find it directly
// instead of retrying at every space (which would be quadratic in the run length).
void split_trailing_space(const Chars& t, Span piece, std::vector<Span>& out) {
  size_t start = piece.end;
  while (start > piece.begin && t.space(start - 1)) --start;
  if (start > piece.begin) out.push_back({piece.begin, start});
  if (start < piece.end) out.push_back({start, piece.end});
}

using Rule = void (*)(const Chars&, Span, std::vector<Span>&);

template <size_t (*Match)(const Chars&, size_t, size_t)>
void rule(const Chars& t, Span piece, std::vector<Span>& out) {
  split_by(t, piece, out, Match);
}

std::vector<Rule> rules_for(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::kGpt2:
      return {rule<match_gpt2>};
    case PreTokenizer::kFalcon:
      return {rule<match_punct_falcon>, rule<match_gpt2>, rule<match_three_digits>};
    case PreTokenizer::kStarcoder:
      return {rule<match_number>, rule<match_gpt2>};
    case PreTokenizer::kDeepseekCoder:
      return {rule<match_line_break>, rule<match_space_letters>, rule<match_space_punct>,
              rule<match_cjk>, rule<match_number>};
    case PreTokenizer::kDeepseekLlm:
      return {rule<match_line_break>,
              rule<match_deepseek_letters>,
              rule<match_deepseek_punct>,
              split_trailing_space,
              rule<match_cjk>,
              rule<match_numbers>};
    case PreTokenizer::kDefault:
      break;
  }
  return {rule<match_punct_default>, rule<match_gpt2>, rule<match_numbers>,
          rule<match_three_digits>};
}

struct NamedKind {
  std::string_view name;
  PreTokenizer kind;
};

constexpr NamedKind kNames[] = {
    {"default", PreTokenizer::kDefault},
    {"gpt-2", PreTokenizer::kGpt2},
    {"mpt", PreTokenizer::kGpt2},
    {"falcon", PreTokenizer::kFalcon},
    {"starcoder", PreTokenizer::kStarcoder},
    {"refact", PreTokenizer::kStarcoder},
    {"deepseek-coder", PreTokenizer::kDeepseekCoder},
    {"deepseek-llm", PreTokenizer::kDeepseekLlm},
};

}  // namespace

util::Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
  for (const NamedKind& n : kNames) {
    if (n.name == name) return n.kind;
  }
  return util::errorf(
      "unsupported pre-tokenizer '{}' in tokenizer.ggml.pre (supported: {}); this model's word "
      "splitting is not implemented",
      name, supported_pre_tokenizer_names());
}

std::string supported_pre_tokenizer_names() {
  std::string out;
  for (const NamedKind& n : kNames) {
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out;
}

void split_words(PreTokenizer kind, std::string_view text, std::vector<ByteSpan>& words) {
  words.clear();
  if (text.empty()) return;
  Chars t;
  t.cp.reserve(text.size());
  t.flags.reserve(text.size());
  t.offset.reserve(text.size() + 1);
  for (size_t pos = 0; pos < text.size();) {
    Utf8Char c = decode_utf8(text, pos);
    t.cp.push_back(c.cp);
    t.flags.push_back(codepoint_flags(c.cp));
    t.offset.push_back(pos);
    pos += c.len;
  }
  t.offset.push_back(text.size());

  std::vector<Span> pieces{{0, t.size()}};
  std::vector<Span> next;
  for (Rule apply : rules_for(kind)) {
    next.clear();
    for (Span piece : pieces) apply(t, piece, next);
    pieces.swap(next);
  }
  words.reserve(pieces.size());
  for (Span p : pieces) words.push_back({t.offset[p.begin], t.offset[p.end]});
}

}  // namespace tokenizer
