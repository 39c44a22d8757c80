// Jinja's built-in filters (`x | name(args)`), each following jinja2/filters.py's behaviour.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/interpreter.h"
#include "chat/unicode.h"

namespace chat {
namespace {

// Jinja filters this renderer does not implement: using one is an "unsupported" error.
constexpr std::string_view kUnsupportedFilters[] = {
    "filesizeformat", "groupby", "pprint", "random", "urlencode", "urlize", "wordwrap", "xmlattr"};

using FilterFn = util::Result<Value> (*)(Interpreter&, const Value&, CallArgs&);

Value soft_str(const Value& v) {
  return v.is_string() ? v : Value::string(to_str(v));
}

Value generator(std::vector<Value> items) {
  return Value::list(std::move(items), ListKind::Generator);
}

Value lower_if_string(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(unicode::to_lower(v.str())) : v;
}

// make_attrgetter: "a.b.0" looks up a, then b, then item 0, each with getitem rules.
util::Result<Value> attr_path(Interpreter& in, Value item, const std::optional<Value>& attribute,
                              const std::optional<Value>& fallback = std::nullopt) {
  if (!attribute || attribute->is_none()) return item;
  std::vector<Value> parts;
  if (attribute->is_string()) {
    for (const auto& p :
         unicode::split(attribute->str(), &(const std::string&)std::string("."), -1)) {
      bool digits = !p.empty() && p.find_first_not_of("0123456789") == std::string::npos;
      parts.push_back(digits ? Value::integer(std::stoll(p)) : Value::string(p));
    }
  } else {
    parts.push_back(*attribute);
  }
  for (const auto& part : parts) {
    HR_ASSIGN_OR_RETURN(item, in.get_item(item, part));
    if (fallback && !fallback->is_none() && item.is_undefined()) item = *fallback;
  }
  return item;
}

// Stable merge sort whose comparison may fail (Python's sorted() raises on mixed types).
util::Status sort_by_keys(std::vector<size_t>& order, const std::vector<Value>& keys,
                          bool reverse) {
  if (order.size() < 2) return {};
  std::vector<size_t> left(order.begin(), order.begin() + order.size() / 2);
  std::vector<size_t> right(order.begin() + order.size() / 2, order.end());
  HR_TRY(sort_by_keys(left, keys, reverse));
  HR_TRY(sort_by_keys(right, keys, reverse));
  size_t i = 0, j = 0, k = 0;
  while (i < left.size() && j < right.size()) {
    const Value& a = keys[left[i]];
    const Value& b = keys[right[j]];
    HR_ASSIGN_OR_RETURN(bool right_first, reverse ? less_than(a, b) : less_than(b, a));
    order[k++] = right_first ? right[j++] : left[i++];
  }
  while (i < left.size()) order[k++] = left[i++];
  while (j < right.size()) order[k++] = right[j++];
  return {};
}

util::Result<std::vector<Value>> sorted(std::vector<Value> items, const std::vector<Value>& keys,
                                        bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  HR_TRY(sort_by_keys(order, keys, reverse));
  std::vector<Value> out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(std::move(items[i]));
  return out;
}

bool flag(const std::optional<Value>& v) {
  return v && truthy(*v);
}

util::Result<int64_t> int_arg(std::string_view what, const std::optional<Value>& v,
                              int64_t fallback) {
  if (!v) return fallback;
  if (!v->is_integral()) {
    return util::errorf("{}: '{}' object cannot be interpreted as an integer", what, type_name(*v));
  }
  return v->as_int();
}

// Python int(str, base) / float(str): surrounding whitespace and '_' between digits allowed.
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

util::Result<Value> f_length(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("length", args, {}));
  HR_ASSIGN_OR_RETURN(int64_t n, length(v));
  return Value::integer(n);
}

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
    o.item_separator = ",";
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

template <std::string (*Fn)(std::string_view)>
util::Result<Value> case_filter(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("filter", args, {}));
  Value s = soft_str(v);
  return Value::string(Fn(s.str()), s.is_safe());
}

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

util::Result<Value> f_default(Interpreter&, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("default", args, {"default_value", "boolean"}));
  if (v.is_undefined() || (flag(b[1]) && !truthy(v))) return b[0] ? *b[0] : Value::string("");
  return v;
}

util::Result<Value> f_join(Interpreter& in, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("join", args, {"d", "attribute"}));
  std::string sep = b[0] ? to_str(*b[0]) : "";
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    HR_ASSIGN_OR_RETURN(Value item, attr_path(in, items[i], b[1]));
    if (i) out += sep;
    out += to_str(item);
    HR_TRY(in.check_size(out.size()));
  }
  return Value::string(std::move(out));
}

util::Result<Value> f_first(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("first", args, {}));
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  if (items.empty()) {
    return Value::undefined(UndefinedData{.hint = "No first item, sequence was empty."});
  }
  return items.front();
}

util::Result<Value> f_last(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("last", args, {}));
  if (v.is_list() && v.list_kind() == ListKind::Generator) {
    return util::Error("'generator' object is not reversible");
  }
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  if (items.empty()) {
    return Value::undefined(UndefinedData{.hint = "No last item, sequence was empty."});
  }
  return items.back();
}

util::Result<Value> f_list(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("list", args, {}));
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  return Value::list(std::move(items));
}

util::Result<Value> f_items(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("items", args, {}));
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) return util::Error("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict().items) out.push_back(Value::list({k, val}, ListKind::Tuple));
  return generator(std::move(out));
}

util::Result<Value> f_dictsort(Interpreter&, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("dictsort", args, {"case_sensitive", "by", "reverse"}));
  if (v.is_undefined()) return util::Error(v.undefined_data().message());
  if (!v.is_dict()) return util::errorf("'{}' object has no attribute 'items'", type_name(v));
  std::string by = b[1] ? to_str(*b[1]) : "key";
  if (by != "key" && by != "value") {
    return util::Error("You can only sort by either \"key\" or \"value\"");
  }
  std::vector<Value> items, keys;
  for (const auto& [k, val] : v.dict().items) {
    items.push_back(Value::list({k, val}, ListKind::Tuple));
    keys.push_back(lower_if_string(by == "key" ? k : val, flag(b[0])));
  }
  HR_ASSIGN_OR_RETURN(auto out, sorted(std::move(items), keys, flag(b[2])));
  return Value::list(std::move(out));
}

util::Result<Value> f_sort(Interpreter& in, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("sort", args, {"reverse", "case_sensitive", "attribute"}));
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  std::vector<Value> keys;
  for (const auto& item : items) {
    if (!b[2] || b[2]->is_none()) {
      keys.push_back(lower_if_string(item, flag(b[1])));
      continue;
    }
    std::vector<Value> parts;  // make_multi_attrgetter: "age,name" sorts by a list of keys
    std::vector<std::string> names =
        b[2]->is_string() ? unicode::split(b[2]->str(), &(const std::string&)std::string(","), -1)
                          : std::vector<std::string>{};
    if (names.empty()) {
      HR_ASSIGN_OR_RETURN(Value k, attr_path(in, item, b[2]));
      parts.push_back(lower_if_string(k, flag(b[1])));
    }
    for (const auto& n : names) {
      HR_ASSIGN_OR_RETURN(Value k, attr_path(in, item, Value::string(n)));
      parts.push_back(lower_if_string(k, flag(b[1])));
    }
    keys.push_back(Value::list(std::move(parts)));
  }
  HR_ASSIGN_OR_RETURN(auto out, sorted(std::move(items), keys, flag(b[0])));
  return Value::list(std::move(out));
}

util::Result<Value> f_unique(Interpreter& in, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("unique", args, {"case_sensitive", "attribute"}));
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  std::vector<Value> seen, out;
  for (const auto& item : items) {
    HR_ASSIGN_OR_RETURN(Value key, attr_path(in, item, b[1]));
    key = lower_if_string(key, flag(b[0]));
    if (key.is_dict() || (key.is_list() && key.list_kind() == ListKind::List)) {
      return util::errorf("unhashable type: '{}'", type_name(key));
    }
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return generator(std::move(out));
}

template <bool kMax>
util::Result<Value> f_min_max(Interpreter& in, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b,
                      bind_args(kMax ? "max" : "min", args, {"case_sensitive", "attribute"}));
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  if (items.empty()) {
    return Value::undefined(UndefinedData{.hint = "No aggregated item, sequence was empty."});
  }
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    HR_ASSIGN_OR_RETURN(Value key, attr_path(in, items[i], b[1]));
    key = lower_if_string(key, flag(b[0]));
    if (i == 0) {
      best_key = key;
      continue;
    }
    HR_ASSIGN_OR_RETURN(bool better, kMax ? less_than(best_key, key) : less_than(key, best_key));
    if (better) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

util::Result<Value> f_sum(Interpreter& in, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("sum", args, {"attribute", "start"}));
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  Value total = b[1] ? *b[1] : Value::integer(0);
  for (const auto& item : items) {
    HR_ASSIGN_OR_RETURN(Value x, attr_path(in, item, b[0]));
    HR_ASSIGN_OR_RETURN(total,
                        binary_op(BinaryOp::Add, total, x, in.options().limits.max_string_bytes));
  }
  return total;
}

util::Result<Value> f_map(Interpreter& in, const Value& v, CallArgs& args) {
  if (!truthy(v)) return generator({});
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  std::vector<Value> out;
  if (args.positional.empty()) {
    std::optional<Value> attribute, fallback;
    for (const auto& [k, val] : args.keyword) {
      if (k == "attribute")
        attribute = val;
      else if (k == "default")
        fallback = val;
      else
        return util::errorf("map: unexpected keyword argument '{}'", k);
    }
    if (!attribute) return util::Error("map requires a filter argument");
    for (const auto& item : items) {
      HR_ASSIGN_OR_RETURN(Value x, attr_path(in, item, attribute, fallback));
      out.push_back(std::move(x));
    }
    return generator(std::move(out));
  }
  if (!args.positional[0].is_string()) return util::Error("map: the filter name must be a string");
  std::string name = args.positional[0].str();
  CallArgs rest{{args.positional.begin() + 1, args.positional.end()}, args.keyword};
  for (const auto& item : items) {
    CallArgs each = rest;
    HR_ASSIGN_OR_RETURN(Value x, in.apply_filter(name, item, each));
    out.push_back(std::move(x));
  }
  return generator(std::move(out));
}

template <bool kSelect, bool kAttr>
util::Result<Value> f_select(Interpreter& in, const Value& v, CallArgs& args) {
  if (!truthy(v)) return generator({});
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  size_t off = 0;
  std::optional<Value> attribute;
  if (kAttr) {
    if (args.positional.empty()) return util::Error("Missing parameter for attribute name");
    attribute = args.positional[0];
    off = 1;
  }
  std::optional<std::string> test;
  if (args.positional.size() > off) {
    if (!args.positional[off].is_string()) return util::Error("the test name must be a string");
    test = args.positional[off].str();
  }
  CallArgs rest;
  if (args.positional.size() > off + 1) {
    rest.positional.assign(args.positional.begin() + static_cast<long>(off) + 1,
                           args.positional.end());
  }
  rest.keyword = args.keyword;
  std::vector<Value> out;
  for (const auto& item : items) {
    HR_ASSIGN_OR_RETURN(Value x, attr_path(in, item, attribute));
    bool hit = truthy(x);
    if (test) {
      CallArgs each = rest;
      HR_ASSIGN_OR_RETURN(hit, in.apply_test(*test, x, each));
    }
    if (hit == kSelect) out.push_back(item);
  }
  return generator(std::move(out));
}

util::Result<Value> f_reverse(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("reverse", args, {}));
  if (v.is_string()) {
    auto cps = unicode::decode(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value::string(unicode::encode(cps), v.is_safe());
  }
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  std::reverse(items.begin(), items.end());
  bool lazy = !(v.is_list() && v.list_kind() == ListKind::Generator);
  return Value::list(std::move(items), lazy ? ListKind::Generator : ListKind::List);
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
  if (flag(b[2])) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" + pad : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i)
      out += "\n" + (lines[i].empty() ? "" : pad) + lines[i];
  }
  if (flag(b[1])) out = pad + out;
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

util::Result<Value> f_batch(Interpreter&, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("batch", args, {"linecount", "fill_with"}, 1));
  HR_ASSIGN_OR_RETURN(int64_t n, int_arg("batch", b[0], 1));
  if (n <= 0) return util::Error("batch: linecount must be positive");
  HR_ASSIGN_OR_RETURN(auto items, iterate(v));
  std::vector<Value> out, row;
  for (auto& item : items) {
    if (static_cast<int64_t>(row.size()) == n) {
      out.push_back(Value::list(std::move(row)));
      row.clear();
    }
    row.push_back(std::move(item));
  }
  if (!row.empty()) {
    if (b[1] && !b[1]->is_none()) row.resize(static_cast<size_t>(n), *b[1]);
    out.push_back(Value::list(std::move(row)));
  }
  return generator(std::move(out));
}

util::Result<Value> f_slice(Interpreter&, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("slice", args, {"slices", "fill_with"}, 1));
  HR_ASSIGN_OR_RETURN(int64_t slices, int_arg("slice", b[0], 1));
  if (slices <= 0) return util::Error("slice: the number of slices must be positive");
  HR_ASSIGN_OR_RETURN(auto seq, iterate(v));
  auto n = static_cast<int64_t>(seq.size());
  int64_t per = n / slices, extra = n % slices, offset = 0;
  std::vector<Value> out;
  for (int64_t k = 0; k < slices; ++k) {
    int64_t start = offset + k * per;
    if (k < extra) ++offset;
    int64_t end = offset + (k + 1) * per;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (b[1] && !b[1]->is_none() && k >= extra) part.push_back(*b[1]);
    out.push_back(Value::list(std::move(part)));
  }
  return generator(std::move(out));
}

util::Result<Value> f_attr(Interpreter& in, const Value& v, CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b, bind_args("attr", args, {"name"}, 1));
  std::string name = to_str(*b[0]);
  bool exists = v.is_object() ? v.object()->attribute(name).has_value() : has_method(v, name);
  if (!exists) {
    return Value::undefined(UndefinedData{.name = name, .owner_type = undefined_owner(v)});
  }
  return in.get_attr(v, name);
}

struct NamedFilter {
  std::string_view name;
  FilterFn fn;
};

constexpr NamedFilter kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_forceescape},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", case_filter<unicode::to_lower>},
    {"map", f_map},
    {"max", f_min_max<true>},
    {"min", f_min_max<false>},
    {"reject", f_select<false, false>},
    {"rejectattr", f_select<false, true>},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select<true, false>},
    {"selectattr", f_select<true, true>},
    {"slice", f_slice},
    {"sort", f_sort},
    {"string", f_string},
    {"striptags", f_striptags},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"truncate", f_truncate},
    {"unique", f_unique},
    {"upper", case_filter<unicode::to_upper>},
    {"wordcount", f_wordcount},
};

}  // namespace

bool is_filter_name(std::string_view name) {
  for (const auto& f : kFilters) {
    if (f.name == name) return true;
  }
  for (std::string_view n : kUnsupportedFilters) {
    if (n == name) return true;
  }
  return false;
}

util::Result<Value> Interpreter::apply_filter(std::string_view name, const Value& value,
                                              CallArgs& args) {
  for (const auto& f : kFilters) {
    if (f.name == name) return f.fn(*this, value, args);
  }
  for (std::string_view n : kUnsupportedFilters) {
    if (n == name) return util::errorf("unsupported filter '{}' — {}", name, kUnsupportedHint);
  }
  return util::errorf("no filter named '{}' — {}", name, kUnsupportedHint);
}

}  // namespace chat
