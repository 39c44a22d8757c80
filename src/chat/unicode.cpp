// UTF-8 code point helpers with Python str semantics: length, slicing, case, whitespace.
#include "chat/unicode.h"

#include <algorithm>

namespace chat::unicode {
namespace {

constexpr char32_t kEscapeBase = 0xDC00;  // surrogateescape: byte b decodes to U+DC00 + b

// Decodes the code point at s[i] and advances i; an invalid sequence consumes one byte.
char32_t next_cp(std::string_view s, size_t& i) {
  auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int n = b0 >= 0xF0 ? 3 : b0 >= 0xE0 ? 2 : b0 >= 0xC2 ? 1 : -1;
  if (n < 0 || b0 > 0xF4 || i + n >= s.size()) {
    ++i;
    return kEscapeBase + b0;
  }
  char32_t cp = b0 & (0x3F >> n);
  for (int k = 1; k <= n; ++k) {
    auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return kEscapeBase + b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return kEscapeBase + b0;
  }
  i += n + 1;
  return cp;
}

bool in(char32_t cp, char32_t lo, char32_t hi) {
  return cp >= lo && cp <= hi;
}

// Pairs laid out as upper/lower alternating; `upper_even` says which parity is upper case.
bool alternating(char32_t cp, char32_t lo, char32_t hi, bool upper_even) {
  return in(cp, lo, hi) && ((cp % 2 == 0) == upper_even);
}

}  // namespace

std::vector<char32_t> decode(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(next_cp(s, i));
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp >= kEscapeBase + 0x80 && cp <= kEscapeBase + 0xFF) {
    out.push_back(static_cast<char>(cp - kEscapeBase));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append_utf8(out, cp);
  return out;
}

std::vector<size_t> offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    out.push_back(i);
    next_cp(s, i);
  }
  out.push_back(s.size());
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) next_cp(s, i);
  return n;
}

bool valid_utf8(std::string_view s, size_t* bad_offset) {
  for (size_t i = 0; i < s.size();) {
    size_t at = i;
    char32_t cp = next_cp(s, i);
    if (cp >= kEscapeBase + 0x80 && cp <= kEscapeBase + 0xFF) {
      if (bad_offset) *bad_offset = at;
      return false;
    }
  }
  return true;
}

bool is_space(char32_t cp) {
  return in(cp, 0x09, 0x0D) || in(cp, 0x1C, 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         in(cp, 0x2000, 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

bool is_line_break(char32_t cp) {
  return in(cp, 0x0A, 0x0D) || in(cp, 0x1C, 0x1E) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  if (cp < 0x20 || in(cp, 0x7F, 0xA0) || cp == 0xAD) return false;
  if (is_space(cp) || in(cp, 0x200B, 0x200F) || in(cp, 0x202A, 0x202E) || in(cp, 0x2060, 0x206F) ||
      cp == 0xFEFF || in(cp, 0xFFF0, 0xFFFB))
    return false;
  if (in(cp, 0x600, 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F || cp == 0x180E)
    return false;
  if (in(cp, 0xD800, 0xF8FF) || cp == 0xFFFE || cp == 0xFFFF) return false;
  if (in(cp, 0xE0000, 0xE007F) || cp >= 0xF0000) return false;
  return true;
}

char32_t lower_cp(char32_t cp) {
  if (cp < 0x80) return in(cp, 'A', 'Z') ? cp + 32 : cp;
  if (in(cp, 0xC0, 0xDE) && cp != 0xD7) return cp + 32;
  if (alternating(cp, 0x100, 0x12F, true) || alternating(cp, 0x132, 0x137, true) ||
      alternating(cp, 0x139, 0x148, false) || alternating(cp, 0x14A, 0x177, true) ||
      alternating(cp, 0x179, 0x17E, false))
    return cp + 1;
  if (cp == 0x178) return 0xFF;
  if (cp == 0x1C4 || cp == 0x1C5 || cp == 0x1C7 || cp == 0x1C8 || cp == 0x1CA || cp == 0x1CB ||
      cp == 0x1F1 || cp == 0x1F2)
    return cp + (cp == 0x1C4 || cp == 0x1C7 || cp == 0x1CA || cp == 0x1F1 ? 2 : 1);
  if (alternating(cp, 0x1CD, 0x1DC, false) || alternating(cp, 0x1DE, 0x1EF, true) ||
      alternating(cp, 0x1F8, 0x21F, true) || alternating(cp, 0x222, 0x233, true))
    return cp + 1;
  if (in(cp, 0x391, 0x3AB) && cp != 0x3A2) return cp + 32;
  if (cp == 0x386) return 0x3AC;
  if (in(cp, 0x388, 0x38A)) return cp + 37;
  if (cp == 0x38C) return 0x3CC;
  if (cp == 0x38E || cp == 0x38F) return cp + 63;
  if (in(cp, 0x410, 0x42F)) return cp + 32;
  if (in(cp, 0x400, 0x40F)) return cp + 80;
  if (alternating(cp, 0x460, 0x481, true) || alternating(cp, 0x48A, 0x4BF, true) ||
      alternating(cp, 0x4C1, 0x4CE, false) || alternating(cp, 0x4D0, 0x52F, true))
    return cp + 1;
  if (cp == 0x4C0) return 0x4CF;
  if (in(cp, 0x531, 0x556)) return cp + 48;
  if (alternating(cp, 0x1E00, 0x1E95, true) || alternating(cp, 0x1EA0, 0x1EFF, true)) return cp + 1;
  if (in(cp, 0x2160, 0x216F)) return cp + 16;  // Roman numerals
  if (in(cp, 0x24B6, 0x24CF)) return cp + 26;  // circled letters
  if (in(cp, 0xFF21, 0xFF3A)) return cp + 32;
  return cp;
}

char32_t upper_cp(char32_t cp) {
  if (cp < 0x80) return in(cp, 'a', 'z') ? cp - 32 : cp;
  if (in(cp, 0xE0, 0xFE) && cp != 0xF7) return cp - 32;
  if (cp == 0xFF) return 0x178;
  if (cp == 0xB5) return 0x39C;
  if (alternating(cp, 0x101, 0x12F, false) || alternating(cp, 0x133, 0x137, false) ||
      alternating(cp, 0x13A, 0x148, true) || alternating(cp, 0x14B, 0x177, false) ||
      alternating(cp, 0x17A, 0x17E, true))
    return cp - 1;
  if (cp == 0x131) return 'I';
  if (cp == 0x1C6 || cp == 0x1C5 || cp == 0x1C9 || cp == 0x1C8 || cp == 0x1CC || cp == 0x1CB ||
      cp == 0x1F3 || cp == 0x1F2)
    return cp - (cp == 0x1C6 || cp == 0x1C9 || cp == 0x1CC || cp == 0x1F3 ? 2 : 1);
  if (alternating(cp, 0x1CE, 0x1DC, true) || alternating(cp, 0x1DF, 0x1EF, false) ||
      alternating(cp, 0x1F9, 0x21F, false) || alternating(cp, 0x223, 0x233, false))
    return cp - 1;
  if (cp == 0x17F) return 'S';
  if (in(cp, 0x3B1, 0x3CB) && cp != 0x3C2) return cp - 32;
  if (cp == 0x3C2) return 0x3A3;
  if (cp == 0x3AC) return 0x386;
  if (in(cp, 0x3AD, 0x3AF)) return cp - 37;
  if (cp == 0x3CC) return 0x38C;
  if (cp == 0x3CD || cp == 0x3CE) return cp - 63;
  if (in(cp, 0x430, 0x44F)) return cp - 32;
  if (in(cp, 0x450, 0x45F)) return cp - 80;
  if (alternating(cp, 0x461, 0x481, false) || alternating(cp, 0x48B, 0x4BF, false) ||
      alternating(cp, 0x4C2, 0x4CE, true) || alternating(cp, 0x4D1, 0x52F, false))
    return cp - 1;
  if (cp == 0x4CF) return 0x4C0;
  if (in(cp, 0x561, 0x586)) return cp - 48;
  if (alternating(cp, 0x1E01, 0x1E95, false) || alternating(cp, 0x1EA1, 0x1EFF, false))
    return cp - 1;
  if (in(cp, 0x2170, 0x217F)) return cp - 16;
  if (in(cp, 0x24D0, 0x24E9)) return cp - 26;
  if (in(cp, 0xFF41, 0xFF5A)) return cp - 32;
  return cp;
}

bool is_cased(char32_t cp) {
  return lower_cp(cp) != cp || upper_cp(cp) != cp || cp == 0xDF || cp == 0x138 || cp == 0x149;
}

bool is_digit(char32_t cp) {
  return in(cp, '0', '9') || in(cp, 0x660, 0x669) || in(cp, 0x6F0, 0x6F9) || in(cp, 0x966, 0x96F) ||
         in(cp, 0xFF10, 0xFF19);
}

bool is_alpha(char32_t cp) {
  if (cp < 0x80) return in(cp, 'a', 'z') || in(cp, 'A', 'Z');
  if (is_cased(cp) || cp == 0xAA || cp == 0xBA) return true;
  return in(cp, 0x5D0, 0x5EA) || in(cp, 0x620, 0x64A) || in(cp, 0x904, 0x939) ||
         in(cp, 0xE01, 0xE30) || in(cp, 0x1100, 0x11FF) || in(cp, 0x3041, 0x3096) ||
         in(cp, 0x30A1, 0x30FA) || in(cp, 0x3400, 0x4DBF) || in(cp, 0x4E00, 0x9FFF) ||
         in(cp, 0xAC00, 0xD7A3) || in(cp, 0xF900, 0xFAFF) || in(cp, 0x20000, 0x2FFFF);
}

bool is_word(char32_t cp) {
  return cp == '_' || is_alpha(cp) || is_digit(cp);
}

std::string to_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = next_cp(s, i);
    // Characters whose upper case is several characters, as in Python.
    static constexpr std::pair<char32_t, const char*> kExpanding[] = {
        {0xDF, "SS"},    {0x149, "\xCA\xBCN"}, {0xFB00, "FF"}, {0xFB01, "FI"}, {0xFB02, "FL"},
        {0xFB03, "FFI"}, {0xFB04, "FFL"},      {0xFB05, "ST"}, {0xFB06, "ST"}};
    auto it = std::find_if(std::begin(kExpanding), std::end(kExpanding),
                           [cp](const auto& e) { return e.first == cp; });
    if (it != std::end(kExpanding)) {
      out += it->second;
    } else {
      append_utf8(out, upper_cp(cp));
    }
  }
  return out;
}

std::string to_lower(std::string_view s) {
  std::vector<char32_t> cps = decode(s);
  std::string out;
  out.reserve(s.size());
  for (size_t k = 0; k < cps.size(); ++k) {
    char32_t cp = cps[k];
    if (cp == 0x130) {  // İ lowers to i + combining dot above, as in Python
      out += "i\xCC\x87";
    } else if (cp == 0x3A3) {  // final sigma: after a cased letter and not before one
      bool after = k > 0 && is_cased(cps[k - 1]);
      bool before = k + 1 < cps.size() && is_cased(cps[k + 1]);
      append_utf8(out, after && !before ? 0x3C2 : 0x3C3);
    } else {
      append_utf8(out, lower_cp(cp));
    }
  }
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = next_cp(s, i);
    append_utf8(out, previous_cased ? lower_cp(cp) : upper_cp(cp));
    previous_cased = is_cased(cp);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = next_cp(s, i);
    append_utf8(out, first ? upper_cp(cp) : lower_cp(cp));
    first = false;
  }
  return out;
}

bool is_lower(std::string_view s) {
  bool any = false;
  for (char32_t cp : decode(s)) {
    if (upper_cp(cp) != cp || cp == 0xDF) any = true;
    if (lower_cp(cp) != cp) return false;
  }
  return any;
}

bool is_upper(std::string_view s) {
  bool any = false;
  for (char32_t cp : decode(s)) {
    if (lower_cp(cp) != cp) any = true;
    if (upper_cp(cp) != cp || cp == 0xDF) return false;
  }
  return any;
}

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<char32_t> cps = decode(s);
  std::vector<char32_t> set;
  if (chars) set = decode(*chars);
  auto strip_it = [&](char32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : is_space(cp);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1])) --e;
  }
  return encode(std::vector<char32_t>(cps.begin() + b, cps.begin() + e));
}

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  std::vector<char32_t> cps = decode(s);
  size_t i = 0, n = cps.size();
  while (true) {
    while (i < n && is_space(cps[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = n;
      while (e > i && is_space(cps[e - 1])) --e;
      out.push_back(encode(std::vector<char32_t>(cps.begin() + i, cps.begin() + e)));
      break;
    }
    size_t j = i;
    while (j < n && !is_space(cps[j])) ++j;
    out.push_back(encode(std::vector<char32_t>(cps.begin() + i, cps.begin() + j)));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit && end >= sep->size()) {
      size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  std::vector<char32_t> cps = decode(s);
  size_t e = cps.size();
  while (true) {
    while (e > 0 && is_space(cps[e - 1])) --e;
    if (e == 0) break;
    if (static_cast<int64_t>(out.size()) == maxsplit) {
      size_t b = 0;
      while (b < e && is_space(cps[b])) ++b;
      out.push_back(encode(std::vector<char32_t>(cps.begin() + b, cps.begin() + e)));
      break;
    }
    size_t b = e;
    while (b > 0 && !is_space(cps[b - 1])) --b;
    out.push_back(encode(std::vector<char32_t>(cps.begin() + b, cps.begin() + e)));
    e = b;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  std::vector<char32_t> cps = decode(s);
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!is_line_break(cps[i])) continue;
    size_t end = i;
    if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    size_t stop = keepends ? i + 1 : end;
    out.push_back(encode(std::vector<char32_t>(cps.begin() + start, cps.begin() + stop)));
    start = i + 1;
  }
  if (start < cps.size()) {
    out.push_back(encode(std::vector<char32_t>(cps.begin() + start, cps.end())));
  }
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `with` around every code point
    std::vector<size_t> at = offsets(s);
    int64_t done = 0;
    for (size_t k = 0; k < at.size(); ++k) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      if (k + 1 < at.size()) out += s.substr(at[k], at[k + 1] - at[k]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += with;
    start = at + old.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

}  // namespace chat::unicode
