// Jinja's string and number filters: trim, upper, title, indent, replace, int, round, tojson …
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/filters.h"
#include "chat/unicode.h"

namespace chat::filters {
namespace {

std::optional<int64_t> parse_int(std::string_view text, int base) {
  std::string s = unicode::strip(text, nullptr, true, true);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() &&
        std::isalnum(static_cast<unsigned char>(s[i - 1])) &&
        std::isalnum(static_cast<unsigned char>(s[i + 1]))) {
      continue;
    }
    digits.push_back(s[i]);
  }
  if (digits.empty()) return std::nullopt;
  size_t start = digits[0] == '+' || digits[0] == '-' ? 1 : 0;
  if (start == digits.size()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno != 0 || *end != '\0' || std::isspace(static_cast<unsigned char>(digits[start]))) {
    return std::nullopt;
  }
  return static_cast<int64_t>(v);
}

std::optional<double> parse_float(std::string_view text) {
  std::string s = unicode::strip(text, nullptr, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() &&
        std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      continue;
    }
    clean.push_back(s[i]);
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(clean.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

// ---- the filters ------------------------------------------------------------------------------

}  // namespace

util::Result<Value> f_tojson(Interpreter&, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(
      auto b, bind_args("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonOptions o;
  o.ensure_ascii = flag(b[0]);
  if (b[1] && !b[1]->is_none()) {
    if (b[1]->is_string()) {
      o.indent = b[1]->str();
    } else if (b[1]->is_integral()) {
      o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, b[1]->as_int())), ' ');
    } else {
      return util::errorf("tojson: indent must be an integer or a string, not {}",
                          type_name(*b[1]));
    }
    o.item_separator.assign(1, ',');  // not = ",": GCC 12 -Wrestrict false positive
  }
  if (b[2] && !b[2]->is_none()) {
    if (!b[2]->is_list() || b[2]->list().items.size() != 2 || !b[2]->list().items[0].is_string() ||
        !b[2]->list().items[1].is_string()) {
      return util::Error("tojson: separators must be a pair of strings");
    }
    o.item_separator = b[2]->list().items[0].str();
    o.key_separator = b[2]->list().items[1].str();
  }
  o.sort_keys = flag(b[3]);
  HR_ASSIGN_OR_RETURN(std::string text, to_json(v, o));
  return Value::string(std::move(text));
}

util::Result<Value> f_trim(Interpreter&, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("trim", args, {"chars"}));
  Value s = soft_str(v);
  std::optional<std::string> chars;
  if (b[0] && !b[0]->is_none()) chars = to_str(*b[0]);
  return Value::string(unicode::strip(s.str(), chars ? &*chars : nullptr, true, true), s.is_safe());
}

util::Result<Value> f_upper(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("upper", args, {}));
  Value s = soft_str(v);
  return Value::string(unicode::to_upper(s.str()), s.is_safe());
}

util::Result<Value> f_lower(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("lower", args, {}));
  Value s = soft_str(v);
  return Value::string(unicode::to_lower(s.str()), s.is_safe());
}

namespace {

// Jinja's title splits on runs of [-\s({[<] and capitalizes each piece.
std::string jinja_title(std::string_view s) {
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
  };
  std::string out;
  bool start = true;
  for (char32_t cp : unicode::decode(s)) {
    std::string one;
    unicode::append_utf8(one, cp);
    out += start ? unicode::to_upper(one) : unicode::to_lower(one);
    start = is_sep(cp);
  }
  return out;
}

}  // namespace

util::Result<Value> f_title(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("title", args, {}));
  return Value::string(jinja_title(to_str(v)));
}

util::Result<Value> f_string(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("string", args, {}));
  return soft_str(v);
}

util::Result<Value> f_safe(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("safe", args, {}));
  return v.is_string() && v.is_safe() ? v : Value::string(to_str(v), true);
}

util::Result<Value> f_escape(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("escape", args, {}));
  if (v.is_string() && v.is_safe()) return v;
  return Value::string(html_escape(to_str(v)), true);
}

util::Result<Value> f_forceescape(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("forceescape", args, {}));
  return Value::string(html_escape(to_str(v)), true);
}

util::Result<Value> f_replace(Interpreter& in, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("replace", args, {"old", "new", "count"}, 2));
  HR_ASSIGN_OR_RETURN(int64_t count,
                      int_arg("replace", b[2] && b[2]->is_none() ? std::nullopt : b[2], -1));
  std::string out = unicode::replace(to_str(v), to_str(*b[0]), to_str(*b[1]), count);
  HR_TRY(in.check_size(out.size()));
  return Value::string(std::move(out));
}

util::Result<Value> f_indent(Interpreter&, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("indent", args, {"width", "first", "blank"}));
  std::string pad;
  if (b[0] && b[0]->is_string()) {
    pad = b[0]->str();
  } else {
    HR_ASSIGN_OR_RETURN(int64_t width, int_arg("indent", b[0], 4));
    pad = std::string(static_cast<size_t>(std::clamp<int64_t>(width, 0, 10000)), ' ');
  }
  Value s = soft_str(v);
  std::vector<std::string> lines = unicode::splitlines(s.str() + "\n", false);
  std::string out;
  bool blank = flag(b[2]);  // indent empty lines too
  if (flag(b[1])) out += pad;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (blank || !lines[i].empty()) out += pad;
    }
    out += lines[i];
  }
  return Value::string(std::move(out), s.is_safe());
}

util::Result<Value> f_center(Interpreter& in, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("center", args, {"width"}));
  CallArgs call{{b[0] ? *b[0] : Value::integer(80)}, {}};
  return call_method(in, soft_str(v), "center", call);
}

util::Result<Value> f_capitalize(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("capitalize", args, {}));
  Value s = soft_str(v);
  return Value::string(unicode::capitalize(s.str()), s.is_safe());
}

util::Result<Value> f_wordcount(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("wordcount", args, {}));
  int64_t n = 0;
  bool in_word = false;
  for (char32_t cp : unicode::decode(to_str(v))) {
    bool w = unicode::is_word(cp);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

util::Result<Value> f_truncate(Interpreter&, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b,
                      bind_args("truncate", args, {"length", "killwords", "end", "leeway"}));
  HR_ASSIGN_OR_RETURN(int64_t len, int_arg("truncate", b[0], 255));
  HR_ASSIGN_OR_RETURN(int64_t leeway,
                      int_arg("truncate", b[3] && b[3]->is_none() ? std::nullopt : b[3], 5));
  std::string end = b[2] ? to_str(*b[2]) : "...";
  auto end_len = static_cast<int64_t>(unicode::length(end));
  if (len < end_len) return util::errorf("expected length >= {}, got {}", end_len, len);
  if (leeway < 0) return util::errorf("expected leeway >= 0, got {}", leeway);
  std::string s = to_str(v);
  auto cps = unicode::decode(s);
  if (static_cast<int64_t>(cps.size()) <= len + leeway) return soft_str(v);
  std::string head = unicode::encode({cps.begin(), cps.begin() + (len - end_len)});
  if (flag(b[1])) return Value::string(head + end);
  size_t space = head.rfind(' ');
  return Value::string((space == std::string::npos ? head : head.substr(0, space)) + end);
}

util::Result<Value> f_striptags(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("striptags", args, {}));
  std::string s = to_str(v), text;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 4, "<!--") == 0) {
      size_t e = s.find("-->", i + 4);
      if (e != std::string::npos) {
        i = e + 3;
        continue;
      }
    }
    if (s[i] == '<') {
      size_t e = s.find('>', i + 1);
      if (e != std::string::npos) {
        i = e + 1;
        continue;
      }
    }
    text += s[i++];
  }
  static const std::pair<std::string_view, std::string_view> kEntities[] = {
      {"&amp;", "&"}, {"&lt;", "<"},   {"&gt;", ">"},
      {"&#39;", "'"}, {"&#34;", "\""}, {"&quot;", "\""}};
  for (const auto& [from, to] : kEntities) text = unicode::replace(text, from, to, -1);
  std::string out;
  for (const auto& word : unicode::split(text, nullptr, -1)) out += (out.empty() ? "" : " ") + word;
  return Value::string(std::move(out));
}

util::Result<Value> f_format(Interpreter&, const Value& v, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    return util::Error("can't handle positional and keyword arguments at the same time");
  }
  Value values = Value::list(args.positional, ListKind::Tuple);
  if (!args.keyword.empty()) {
    DictData d;
    for (const auto& [k, val] : args.keyword) d.set(Value::string(k), val);
    values = Value::dict(std::move(d));
  }
  Value s = soft_str(v);
  HR_ASSIGN_OR_RETURN(std::string out, percent_format(s.str(), values, s.is_safe()));
  return Value::string(std::move(out), s.is_safe());
}

util::Result<Value> f_int(Interpreter&, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("int", args, {"default", "base"}));
  Value fallback = b[0] ? *b[0] : Value::integer(0);
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) {
    double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::integer(static_cast<int64_t>(d));
  }
  if (!v.is_string()) return fallback;
  HR_ASSIGN_OR_RETURN(int64_t base, int_arg("int", b[1], 10));
  if (auto i = parse_int(v.str(), static_cast<int>(base))) return Value::integer(*i);
  if (auto d = parse_float(v.str()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18) {
    return Value::integer(static_cast<int64_t>(*d));
  }
  return fallback;
}

util::Result<Value> f_float(Interpreter&, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("float", args, {"default"}));
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string()) {
    if (auto d = parse_float(v.str())) return Value::number(*d);
  }
  return b[0] ? *b[0] : Value::number(0.0);
}

util::Result<Value> f_abs(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("abs", args, {}));
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) return util::Error("integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  return util::errorf("bad operand type for abs(): '{}'", type_name(v));
}

util::Result<Value> f_round(Interpreter&, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("round", args, {"precision", "method"}));
  HR_ASSIGN_OR_RETURN(int64_t precision, int_arg("round", b[0], 0));
  std::string method = b[1] ? to_str(*b[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    return util::Error("method must be common, ceil or floor");
  }
  if (!v.is_number()) return util::errorf("type {} doesn't define __round__ method", type_name(v));
  if (method == "common") {
    if (v.is_integral() && precision >= 0) return Value::integer(v.as_int());
    // printf rounds the exact binary value half-to-even, as Python's round() does.
    char buf[512];
    int p = static_cast<int>(std::clamp<int64_t>(precision, 0, 300));
    std::snprintf(buf, sizeof buf, "%.*f", p, v.as_float());
    double r = std::strtod(buf, nullptr);
    if (precision < 0) {
      double scale = std::pow(10.0, static_cast<double>(-precision));
      r = std::nearbyint(v.as_float() / scale) * scale;
    }
    return v.is_integral() ? Value::integer(static_cast<int64_t>(r)) : Value::number(r);
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_float() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

}  // namespace chat::filters
