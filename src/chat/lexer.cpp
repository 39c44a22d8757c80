// Tokenizer for the Jinja2 template syntax, with Jinja's whitespace control rules.
#include "chat/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "chat/unicode.h"

namespace chat {
namespace {

// Maps byte offsets of the normalised source to line:column (columns count code points).
class LineIndex {
 public:
  explicit LineIndex(std::string_view s) : s_(s) {
    starts_.push_back(0);
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n') starts_.push_back(i + 1);
    }
  }
  SourceLoc at(size_t offset) const {
    auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
    size_t line = static_cast<size_t>(it - starts_.begin());
    size_t start = starts_[line - 1];
    size_t column = unicode::length(s_.substr(start, offset - start)) + 1;
    return {static_cast<int>(line), static_cast<int>(column)};
  }

 private:
  std::string_view s_;
  std::vector<size_t> starts_;
};

// Length of the code point ending just before `end`, and whether it is Python whitespace.
bool space_before(std::string_view s, size_t end, size_t* cp_len) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80 && end - b < 4) --b;
  auto cps = unicode::decode(s.substr(b, end - b));
  if (cps.size() != 1) {  // not a single well-formed code point: look at the last byte only
    *cp_len = 1;
    return false;
  }
  *cp_len = end - b;
  return unicode::is_space(cps[0]);
}

size_t rstrip_len(std::string_view s) {
  size_t end = s.size(), n = 0;
  while (end > 0 && space_before(s, end, &n)) end -= n;
  return end;
}

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    size_t next = pos;
    auto b0 = static_cast<unsigned char>(s[pos]);
    size_t len = b0 < 0x80 ? 1 : b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
    next = std::min(s.size(), pos + len);
    auto cps = unicode::decode(s.substr(pos, next - pos));
    if (cps.size() != 1 || !unicode::is_space(cps[0])) break;
    pos = next;
  }
  return pos;
}

bool all_space(std::string_view s) {
  return !s.empty() && skip_space(s, 0) == s.size();
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// Python's unicode-escape decoding of a string literal body (Jinja applies it to literals).
util::Result<std::string> unescape(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    char e = body[++i];
    auto hex = [&](size_t n) -> util::Result<char32_t> {
      if (i + n >= body.size()) return util::Error("truncated escape sequence in string");
      char32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        char h = body[i + k];
        int d = is_digit(h)              ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0) return util::Error("truncated escape sequence in string");
        v = v * 16 + static_cast<char32_t>(d);
      }
      i += n;
      return v;
    };
    switch (e) {
      case '\n':
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
      case 'u':
      case 'U': {
        HR_ASSIGN_OR_RETURN(char32_t cp, hex(e == 'x' ? 2 : e == 'u' ? 4 : 8));
        if (cp > 0x10FFFF) return util::Error("illegal Unicode character in string escape");
        unicode::append_utf8(out, cp);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          char32_t v = static_cast<char32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k) {
            v = v * 8 + static_cast<char32_t>(body[++i] - '0');
          }
          unicode::append_utf8(out, v);
        } else if (e == 'N') {
          return util::Error("\\N{...} escapes are not supported in string literals");
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options)
      : src_(std::move(source)), opt_(options), index_(src_) {}

  util::Result<std::vector<Token>> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      // Root state: data up to the next tag opener.
      size_t p = pos_;
      char kind = 0;
      while ((p = src_.find('{', p)) != std::string::npos) {
        if (p + 1 < src_.size() &&
            (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
          kind = src_[p + 1];
          break;
        }
        ++p;
      }
      if (!kind) {
        push_data(std::string_view(src_).substr(pos_), pos_);
        break;
      }
      char sign =
          p + 2 < src_.size() && (src_[p + 2] == '-' || src_[p + 2] == '+') ? src_[p + 2] : 0;
      size_t raw_end = kind == '%' ? match_raw_begin(p + 2 + (sign ? 1 : 0)) : 0;
      std::string_view text = std::string_view(src_).substr(pos_, p - pos_);
      if (sign == '-') {
        text = text.substr(0, rstrip_len(text));
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string_view::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && all_space(text.substr(l_pos))) {
          text = text.substr(0, l_pos);
        }
      }
      push_data(text, pos_);
      size_t body = p + 2 + (sign ? 1 : 0);
      if (raw_end) {
        line_starting = src_[raw_end - 1] == '\n';
        HR_TRY(lex_raw(raw_end, &line_starting));
      } else if (kind == '#') {
        HR_TRY(lex_comment(p, body, &line_starting));
      } else {
        HR_TRY(lex_tag(kind, p, body, &line_starting));
      }
    }
    tokens_.push_back({TokenType::Eof, "", index_.at(src_.size())});
    return std::move(tokens_);
  }

 private:
  util::Error fail(size_t offset, std::string_view message) const {
    SourceLoc loc = index_.at(offset);
    return util::errorf("line {}, column {}: {}", loc.line, loc.column, message);
  }

  void push_data(std::string_view text, size_t offset) {
    if (!text.empty()) tokens_.push_back({TokenType::Data, std::string(text), index_.at(offset)});
  }

  // `{% raw %}` (the sign already skipped): returns the offset after its `%}`, or 0.
  size_t match_raw_begin(size_t at) const {
    size_t q = skip_space(src_, at);
    if (src_.compare(q, 3, "raw") != 0) return 0;
    q = skip_space(src_, q + 3);
    if (src_.compare(q, 3, "-%}") == 0) return skip_space(src_, q + 3);
    if (src_.compare(q, 2, "%}") == 0) return q + 2;
    return 0;
  }

  util::Status lex_raw(size_t start, bool* line_starting) {
    size_t q = start;
    while ((q = src_.find("{%", q)) != std::string::npos) {
      size_t r = q + 2;
      char sign = r < src_.size() && (src_[r] == '-' || src_[r] == '+') ? src_[r] : 0;
      if (sign) ++r;
      r = skip_space(src_, r);
      if (src_.compare(r, 6, "endraw") != 0) {
        q += 2;
        continue;
      }
      r = skip_space(src_, r + 6);
      size_t end;
      if (src_.compare(r, 3, "+%}") == 0) {
        end = r + 3;
      } else if (src_.compare(r, 3, "-%}") == 0) {
        end = skip_space(src_, r + 3);
      } else if (src_.compare(r, 2, "%}") == 0) {
        end = r + 2 + (opt_.trim_blocks && r + 2 < src_.size() && src_[r + 2] == '\n' ? 1 : 0);
      } else {
        q += 2;
        continue;
      }
      std::string_view text = std::string_view(src_).substr(start, q - start);
      if (sign == '-') {
        text = text.substr(0, rstrip_len(text));
      } else if (sign != '+' && opt_.lstrip_blocks) {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string_view::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || *line_starting) && all_space(text.substr(l_pos))) {
          text = text.substr(0, l_pos);
        }
      }
      push_data(text, start);
      *line_starting = src_[end - 1] == '\n';
      pos_ = end;
      return {};
    }
    return fail(start, "missing {% endraw %} for this raw block");
  }

  util::Status lex_comment(size_t open, size_t body, bool* line_starting) {
    size_t q = src_.find("#}", body);
    if (q == std::string::npos) return fail(open, "missing end of comment tag '#}'");
    size_t end = q + 2;
    if (q > body && src_[q - 1] == '-') {
      end = skip_space(src_, end);
    } else if (!(q > body && src_[q - 1] == '+') && opt_.trim_blocks && end < src_.size() &&
               src_[end] == '\n') {
      ++end;
    }
    *line_starting = src_[end - 1] == '\n';
    pos_ = end;
    return {};
  }

  // Inside {{ … }} or {% … %}: expression tokens up to the matching end tag.
  util::Status lex_tag(char kind, size_t open, size_t body, bool* line_starting) {
    bool block = kind == '%';
    tokens_.push_back(
        {block ? TokenType::BlockBegin : TokenType::VariableBegin, "", index_.at(open)});
    std::vector<char> balance;
    size_t i = body;
    while (true) {
      if (i >= src_.size()) {
        return fail(open,
                    block ? "unclosed tag: missing '%}'" : "unclosed expression: missing '}}'");
      }
      if (balance.empty()) {
        size_t end = 0;
        if (block) {
          if (src_.compare(i, 3, "+%}") == 0) {
            end = i + 3;
          } else if (src_.compare(i, 3, "-%}") == 0) {
            end = skip_space(src_, i + 3);
          } else if (src_.compare(i, 2, "%}") == 0) {
            end = i + 2 + (opt_.trim_blocks && i + 2 < src_.size() && src_[i + 2] == '\n' ? 1 : 0);
          }
        } else if (src_.compare(i, 3, "-}}") == 0) {
          end = skip_space(src_, i + 3);
        } else if (src_.compare(i, 2, "}}") == 0) {
          end = i + 2;
        }
        if (end) {
          tokens_.push_back(
              {block ? TokenType::BlockEnd : TokenType::VariableEnd, "", index_.at(i)});
          *line_starting = src_[end - 1] == '\n';
          pos_ = end;
          return {};
        }
      }
      size_t next = skip_space(src_, i);
      if (next != i) {
        i = next;
        continue;
      }
      HR_ASSIGN_OR_RETURN(i, lex_expression_token(i, balance));
    }
  }

  util::Result<size_t> lex_expression_token(size_t i, std::vector<char>& balance) {
    char c = src_[i];
    SourceLoc loc = index_.at(i);
    if (is_digit(c)) return lex_number(i);
    if (is_name_start(c)) {
      size_t j = i;
      while (j < src_.size() && is_name_char(src_[j])) ++j;
      tokens_.push_back({TokenType::Name, src_.substr(i, j - i), loc});
      return j;
    }
    if (c == '\'' || c == '"') {
      size_t j = i + 1;
      while (j < src_.size() && src_[j] != c) j += src_[j] == '\\' ? 2 : 1;
      if (j >= src_.size()) return fail(i, "unterminated string literal");
      auto text = unescape(std::string_view(src_).substr(i + 1, j - i - 1));
      if (!text) return fail(i, text.error().message());
      tokens_.push_back({TokenType::String, std::move(*text), loc});
      return j + 1;
    }
    static constexpr std::array<std::string_view, 8> kTwo = {
        "//", "**", "==", "!=", ">=", "<=", "", ""};
    for (std::string_view op : kTwo) {
      if (!op.empty() && src_.compare(i, 2, op) == 0) {
        tokens_.push_back({TokenType::Operator, std::string(op), loc});
        return i + 2;
      }
    }
    static constexpr std::string_view kOne = "+-*/%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string_view::npos) {
      return fail(i, fmt::format("unexpected character {}", repr_char(i)));
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) return fail(i, fmt::format("unexpected '{}'", c));
      if (balance.back() != c) {
        return fail(i, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
      }
      balance.pop_back();
    }
    tokens_.push_back({TokenType::Operator, std::string(1, c), loc});
    return i + 1;
  }

  std::string repr_char(size_t i) const {
    auto cps = unicode::decode(std::string_view(src_).substr(i, 4));
    std::string s;
    if (!cps.empty()) unicode::append_utf8(s, cps[0]);
    return "'" + s + "'";
  }

  // Jinja's integer and float literals (with '_' separators, 0x/0o/0b prefixes).
  util::Result<size_t> lex_number(size_t i) {
    SourceLoc loc = index_.at(i);
    auto digits = [&](size_t j, auto pred) {
      while (j < src_.size() &&
             (pred(src_[j]) || (src_[j] == '_' && j + 1 < src_.size() && pred(src_[j + 1]))))
        ++j;
      return j;
    };
    auto dec = [](char ch) { return is_digit(ch); };
    bool after_dot = i > 0 && src_[i - 1] == '.';
    size_t j = digits(i, dec);
    bool is_float = false;
    if (!after_dot) {
      size_t k = j;
      if (k + 1 < src_.size() && src_[k] == '.' && is_digit(src_[k + 1])) {
        k = digits(k + 1, dec);
        is_float = true;
      }
      if (k < src_.size() && (src_[k] == 'e' || src_[k] == 'E')) {
        size_t e = k + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
        if (e < src_.size() && is_digit(src_[e])) {
          k = digits(e, dec);
          is_float = true;
        }
      }
      if (is_float) j = k;
    }
    std::string text;
    for (size_t k = i; k < j; ++k) {
      if (src_[k] != '_') text.push_back(src_[k]);
    }
    if (is_float) {
      tokens_.push_back({TokenType::Float, text, loc});
      return j;
    }
    if (src_[i] == '0') {
      char p = i + 1 < src_.size() ? static_cast<char>(src_[i + 1] | 0x20) : 0;
      if (p == 'x' || p == 'o' || p == 'b') {
        auto pred = [p](char ch) {
          char l = static_cast<char>(ch | 0x20);
          return p == 'x'   ? (is_digit(ch) || (l >= 'a' && l <= 'f'))
                 : p == 'o' ? (ch >= '0' && ch <= '7')
                            : (ch == '0' || ch == '1');
        };
        size_t k = digits(i + 2, pred);
        if (k > i + 2) {
          std::string body;
          for (size_t m = i + 2; m < k; ++m) {
            if (src_[m] != '_') body.push_back(src_[m]);
          }
          int base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
          uint64_t v = 0;
          for (char ch : body) {
            char l = static_cast<char>(ch | 0x20);
            int d = is_digit(ch) ? ch - '0' : l - 'a' + 10;
            if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) {
              return fail(i, "integer literal too large");
            }
            v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
          }
          tokens_.push_back({TokenType::Integer, std::to_string(v), loc});
          return k;
        }
      }
      // "0", "00": Jinja's integer rule takes zeros only.
      size_t k = i;
      while (k < src_.size() &&
             (src_[k] == '0' || (src_[k] == '_' && k + 1 < src_.size() && src_[k + 1] == '0')))
        ++k;
      tokens_.push_back({TokenType::Integer, "0", loc});
      return k;
    }
    tokens_.push_back({TokenType::Integer, text, loc});
    return j;
  }

  std::string src_;
  LexerOptions opt_;
  LineIndex index_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

std::string normalize_newlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

util::Result<std::vector<Token>> tokenize(std::string_view source, const LexerOptions& options) {
  Lexer lexer(normalize_newlines(source, options.keep_trailing_newline), options);
  return lexer.run();
}

}  // namespace chat
