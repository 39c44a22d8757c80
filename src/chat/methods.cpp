// Python methods of str, list and dict, as templates call them (`text.split('\n')`, `d.items()`).
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "chat/interpreter.h"
#include "chat/objects.h"
#include "chat/unicode.h"

namespace chat {
namespace {

constexpr std::array<std::string_view, 46> kStrMethods = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper"};
constexpr std::array<std::string_view, 11> kListMethods = {"append", "clear",   "copy",   "count",
                                                           "extend", "index",   "insert", "pop",
                                                           "remove", "reverse", "sort"};
constexpr std::array<std::string_view, 11> kDictMethods = {
    "clear", "copy",    "fromkeys",   "get",    "items", "keys",
    "pop",   "popitem", "setdefault", "update", "values"};

template <size_t N>
bool in(const std::array<std::string_view, N>& table, std::string_view name) {
  return std::find(table.begin(), table.end(), name) != table.end();
}

util::Error unsupported_method(const Value& self, std::string_view name) {
  return util::errorf("unsupported method {}.{}() — {}", type_name(self), name, kUnsupportedHint);
}

util::Result<std::string> need_str(std::string_view what, const std::optional<Value>& v) {
  if (!v || !v->is_string()) {
    return util::errorf("{} expects a string argument, not {}", what,
                        v ? type_name(*v) : std::string("nothing"));
  }
  return v->str();
}

// An optional string argument where None means "the default" (strip(None), split(None)).
util::Result<std::optional<std::string>> opt_str(std::string_view what,
                                                 const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::optional<std::string>();
  HR_ASSIGN_OR_RETURN(std::string s, need_str(what, v));
  return std::optional<std::string>(std::move(s));
}

util::Result<int64_t> opt_int(std::string_view what, const std::optional<Value>& v,
                              int64_t fallback) {
  if (!v || v->is_none()) return fallback;
  if (!v->is_integral()) {
    return util::errorf("{}: '{}' object cannot be interpreted as an integer", what, type_name(*v));
  }
  return v->as_int();
}

Value str_list(const std::vector<std::string>& parts, bool safe) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(Value::string(p, safe));
  return Value::list(std::move(items));
}

// Python's clamping of start/end arguments to code point positions [0, n].
void clamp_range(int64_t n, int64_t& start, int64_t& end) {
  if (start < 0) start = std::max<int64_t>(0, start + n);
  if (end < 0) end = std::max<int64_t>(0, end + n);
  start = std::min(start, n);
  end = std::min(end, n);
}

// find/rfind/count over code points; returns -1 when absent (count returns the count).
util::Result<int64_t> search(std::string_view name, const std::string& hay, const CallArgs& args) {
  HR_ASSIGN_OR_RETURN(auto b,
                      bind_args(fmt::format("str.{}()", name), args, {"sub", "start", "end"}, 1));
  HR_ASSIGN_OR_RETURN(std::string sub, need_str(name, b[0]));
  std::vector<char32_t> h = unicode::decode(hay), s = unicode::decode(sub);
  auto n = static_cast<int64_t>(h.size());
  HR_ASSIGN_OR_RETURN(int64_t start, opt_int(name, b[1], 0));
  HR_ASSIGN_OR_RETURN(int64_t end, opt_int(name, b[2], n));
  clamp_range(n, start, end);
  auto m = static_cast<int64_t>(s.size());
  if (name == "count") {
    if (end - start < m) return int64_t{0};
    if (m == 0) return end - start + 1;
    int64_t count = 0;
    for (int64_t i = start; i + m <= end;) {
      if (std::equal(s.begin(), s.end(), h.begin() + i)) {
        ++count;
        i += m;
      } else {
        ++i;
      }
    }
    return count;
  }
  bool reverse = name == "rfind" || name == "rindex";
  if (end - start < m) return int64_t{-1};
  for (int64_t k = 0; k <= end - start - m; ++k) {
    int64_t i = reverse ? end - m - k : start + k;
    if (std::equal(s.begin(), s.end(), h.begin() + i)) return i;
  }
  return int64_t{-1};
}

util::Result<bool> affix_test(std::string_view name, const std::string& self,
                              const CallArgs& args) {
  HR_ASSIGN_OR_RETURN(
      auto b, bind_args(fmt::format("str.{}()", name), args, {"prefix", "start", "end"}, 1));
  std::vector<char32_t> h = unicode::decode(self);
  auto n = static_cast<int64_t>(h.size());
  HR_ASSIGN_OR_RETURN(int64_t start, opt_int(name, b[1], 0));
  HR_ASSIGN_OR_RETURN(int64_t end, opt_int(name, b[2], n));
  clamp_range(n, start, end);
  if (start > end) return false;
  std::vector<char32_t> part(h.begin() + start, h.begin() + end);
  std::vector<Value> options;
  if (b[0]->is_list() && b[0]->list_kind() == ListKind::Tuple) {
    options = b[0]->list().items;
  } else {
    options.push_back(*b[0]);
  }
  for (const auto& opt : options) {
    if (!opt.is_string()) {
      return util::errorf("{} first arg must be str or a tuple of str, not {}", name,
                          type_name(opt));
    }
    std::vector<char32_t> a = unicode::decode(opt.str());
    if (a.size() > part.size()) continue;
    bool hit = name == "startswith" ? std::equal(a.begin(), a.end(), part.begin())
                                    : std::equal(a.rbegin(), a.rend(), part.rbegin());
    if (hit) return true;
  }
  return false;
}

util::Result<Value> pad(std::string_view name, const Value& self, const CallArgs& args) {
  bool zfill = name == "zfill";
  HR_ASSIGN_OR_RETURN(
      auto b, bind_args(fmt::format("str.{}()", name), args,
                        zfill ? std::initializer_list<std::string_view>{"width"}
                              : std::initializer_list<std::string_view>{"width", "fillchar"},
                        1));
  HR_ASSIGN_OR_RETURN(int64_t width, opt_int(name, b[0], 0));
  std::string fill = " ";
  if (!zfill && b[1]) {
    HR_ASSIGN_OR_RETURN(fill, need_str(name, b[1]));
    if (unicode::length(fill) != 1) {
      return util::Error("The fill character must be exactly one character long");
    }
  }
  const std::string& s = self.str();
  auto len = static_cast<int64_t>(unicode::length(s));
  if (width <= len) return self;
  int64_t total = width - len, left = 0;
  if (name == "rjust" || zfill) {
    left = total;
  } else if (name == "center") {
    left = total / 2 + (total & width & 1);  // CPython's rounding for odd padding
  }
  auto times = [](const std::string& f, int64_t k) {
    std::string r;
    for (int64_t i = 0; i < k; ++i) r += f;
    return r;
  };
  if (zfill) {
    bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
    return Value::string((sign ? s.substr(0, 1) : "") + times("0", left) + s.substr(sign ? 1 : 0),
                         self.is_safe());
  }
  return Value::string(times(fill, left) + s + times(fill, total - left), self.is_safe());
}

util::Result<Value> str_method(Interpreter& interp, const Value& self, std::string_view name,
                               CallArgs& args) {
  const std::string& s = self.str();
  bool safe = self.is_safe();
  std::string what = fmt::format("str.{}()", name);
  auto no_args = [&]() -> util::Status {
    if (!args.positional.empty() || !args.keyword.empty()) {
      return util::errorf("{} takes no arguments", what);
    }
    return {};
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"chars"}));
    HR_ASSIGN_OR_RETURN(auto chars, opt_str(what, b[0]));
    return Value::string(
        unicode::strip(s, chars ? &*chars : nullptr, name != "rstrip", name != "lstrip"), safe);
  }
  if (name == "split" || name == "rsplit") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"sep", "maxsplit"}));
    HR_ASSIGN_OR_RETURN(auto sep, opt_str(what, b[0]));
    HR_ASSIGN_OR_RETURN(int64_t maxsplit, opt_int(what, b[1], -1));
    if (sep && sep->empty()) return util::Error("empty separator");
    const std::string* p = sep ? &*sep : nullptr;
    return str_list(
        name == "split" ? unicode::split(s, p, maxsplit) : unicode::rsplit(s, p, maxsplit), safe);
  }
  if (name == "splitlines") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"keepends"}));
    return str_list(unicode::splitlines(s, b[0] && truthy(*b[0])), safe);
  }
  if (name == "startswith" || name == "endswith") {
    HR_ASSIGN_OR_RETURN(bool hit, affix_test(name, s, args));
    return Value::boolean(hit);
  }
  if (name == "replace") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"old", "new", "count"}, 2));
    HR_ASSIGN_OR_RETURN(std::string old, need_str(what, b[0]));
    HR_ASSIGN_OR_RETURN(std::string with, need_str(what, b[1]));
    if (safe && !b[1]->is_safe()) with = html_escape(with);
    HR_ASSIGN_OR_RETURN(int64_t count, opt_int(what, b[2], -1));
    std::string out = unicode::replace(s, old, with, count);
    HR_TRY(interp.check_size(out.size()));
    return Value::string(std::move(out), safe);
  }
  if (name == "upper" || name == "lower" || name == "casefold" || name == "title" ||
      name == "capitalize" || name == "swapcase") {
    HR_TRY(no_args());
    if (name == "upper") return Value::string(unicode::to_upper(s), safe);
    if (name == "title") return Value::string(unicode::title(s), safe);
    if (name == "capitalize") return Value::string(unicode::capitalize(s), safe);
    if (name == "swapcase") {
      std::string out;
      for (char32_t cp : unicode::decode(s)) {
        char32_t lo = unicode::lower_cp(cp);
        unicode::append_utf8(out, lo != cp ? lo : unicode::upper_cp(cp));
      }
      return Value::string(std::move(out), safe);
    }
    return Value::string(unicode::to_lower(s), safe);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    std::string_view base = name == "index" ? "find" : name == "rindex" ? "rfind" : name;
    HR_ASSIGN_OR_RETURN(int64_t at, search(base, s, args));
    if (at < 0 && (name == "index" || name == "rindex")) {
      return util::Error("substring not found");
    }
    return Value::integer(at);
  }
  if (name == "join") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"iterable"}, 1));
    HR_ASSIGN_OR_RETURN(auto items, iterate(*b[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return util::errorf("sequence item {}: expected str instance, {} found", i,
                            type_name(items[i]));
      }
      if (i) out += s;
      out += safe && !items[i].is_safe() ? html_escape(items[i].str()) : items[i].str();
    }
    HR_TRY(interp.check_size(out.size()));
    return Value::string(std::move(out), safe);
  }
  if (name == "format") {
    HR_ASSIGN_OR_RETURN(std::string out, python_format(interp, s, args, safe));
    return Value::string(std::move(out), safe);
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    return pad(name, self, args);
  }
  if (name == "partition" || name == "rpartition") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"sep"}, 1));
    HR_ASSIGN_OR_RETURN(std::string sep, need_str(what, b[0]));
    if (sep.empty()) return util::Error("empty separator");
    size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    std::vector<std::string> parts;
    if (at == std::string::npos) {
      parts = name == "partition" ? std::vector<std::string>{s, "", ""}
                                  : std::vector<std::string>{"", "", s};
    } else {
      parts = {s.substr(0, at), sep, s.substr(at + sep.size())};
    }
    Value out = str_list(parts, safe);
    out.list().kind = ListKind::Tuple;
    return out;
  }
  if (name == "removeprefix" || name == "removesuffix") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"affix"}, 1));
    HR_ASSIGN_OR_RETURN(std::string a, need_str(what, b[0]));
    if (name == "removeprefix" && s.compare(0, a.size(), a) == 0) {
      return Value::string(s.substr(a.size()), safe);
    }
    if (name == "removesuffix" && !a.empty() && s.size() >= a.size() &&
        s.compare(s.size() - a.size(), a.size(), a) == 0) {
      return Value::string(s.substr(0, s.size() - a.size()), safe);
    }
    return self;
  }
  if (name.substr(0, 2) == "is") {
    HR_TRY(no_args());
    std::vector<char32_t> cps = unicode::decode(s);
    auto all = [&](auto pred) { return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred); };
    if (name == "isalnum") {
      return Value::boolean(
          all([](char32_t c) { return unicode::is_alpha(c) || unicode::is_digit(c); }));
    }
    if (name == "isalpha") return Value::boolean(all(unicode::is_alpha));
    if (name == "isascii") {
      return Value::boolean(
          std::all_of(cps.begin(), cps.end(), [](char32_t c) { return c < 0x80; }));
    }
    if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") {
      return Value::boolean(all(unicode::is_digit));
    }
    if (name == "isspace") return Value::boolean(all(unicode::is_space));
    if (name == "islower") return Value::boolean(unicode::is_lower(s));
    if (name == "isupper") return Value::boolean(unicode::is_upper(s));
    if (name == "isprintable") {
      return Value::boolean(std::all_of(cps.begin(), cps.end(), unicode::is_printable));
    }
    if (name == "istitle") {
      bool any = false, previous_cased = false;
      for (char32_t cp : cps) {
        bool upper = unicode::lower_cp(cp) != cp, lower = unicode::upper_cp(cp) != cp;
        if ((upper && previous_cased) || (lower && !previous_cased)) return Value::boolean(false);
        previous_cased = upper || lower;
        any |= previous_cased;
      }
      return Value::boolean(any);
    }
    if (name == "isidentifier") {
      bool ok = !cps.empty() && (cps[0] == '_' || unicode::is_alpha(cps[0])) &&
                std::all_of(cps.begin(), cps.end(), unicode::is_word);
      return Value::boolean(ok);
    }
  }
  return unsupported_method(self, name);
}

util::Result<Value> list_method(Interpreter& interp, const Value& self, std::string_view name,
                                CallArgs& args) {
  std::string what = fmt::format("{}.{}()", type_name(self), name);
  auto& items = self.list().items;
  if (name == "count" || name == "index") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"value"}, 1));
    int64_t count = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!equals(items[i], *b[0])) continue;
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      ++count;
    }
    if (name == "index") return util::errorf("{} is not in {}", repr(*b[0]), type_name(self));
    return Value::integer(count);
  }
  if (name == "copy") return Value::list(items, self.list_kind());
  if (name == "append") {
    interp.remember_container(self);
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"object"}, 1));
    HR_TRY(interp.check_size(items.size() * 16));
    items.push_back(*b[0]);
    return Value::none();
  }
  if (name == "extend") {
    interp.remember_container(self);
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"iterable"}, 1));
    HR_ASSIGN_OR_RETURN(auto more, iterate(*b[0]));
    HR_TRY(interp.check_size((items.size() + more.size()) * 16));
    items.insert(items.end(), more.begin(), more.end());
    return Value::none();
  }
  if (name == "insert") {
    interp.remember_container(self);
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"index", "object"}, 2));
    HR_ASSIGN_OR_RETURN(int64_t i, opt_int(what, b[0], 0));
    auto n = static_cast<int64_t>(items.size());
    if (i < 0) i = std::max<int64_t>(0, i + n);
    items.insert(items.begin() + std::min(i, n), *b[1]);
    return Value::none();
  }
  if (name == "pop") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"index"}));
    if (items.empty()) return util::Error("pop from empty list");
    auto n = static_cast<int64_t>(items.size());
    HR_ASSIGN_OR_RETURN(int64_t i, opt_int(what, b[0], -1));
    if (i < 0) i += n;
    if (i < 0 || i >= n) return util::Error("pop index out of range");
    Value v = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return v;
  }
  if (name == "remove") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"value"}, 1));
    for (auto it = items.begin(); it != items.end(); ++it) {
      if (equals(*it, *b[0])) {
        items.erase(it);
        return Value::none();
      }
    }
    return util::Error("list.remove(x): x not in list");
  }
  if (name == "clear") {
    items.clear();
    return Value::none();
  }
  if (name == "reverse") {
    std::reverse(items.begin(), items.end());
    return Value::none();
  }
  return unsupported_method(self, name);
}

util::Result<Value> dict_method(Interpreter& interp, const Value& self, std::string_view name,
                                CallArgs& args) {
  std::string what = fmt::format("dict.{}()", name);
  DictData& d = self.dict();
  if (name == "get") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"key", "default"}, 1));
    if (const Value* v = d.find(*b[0])) return *v;
    return b[1] ? *b[1] : Value::none();
  }
  if (name == "items" || name == "keys" || name == "values") {
    if (!args.positional.empty() || !args.keyword.empty()) {
      return util::errorf("{} takes no arguments", what);
    }
    std::vector<Value> out;
    for (const auto& [k, v] : d.items) {
      if (name == "items") {
        out.push_back(Value::list({k, v}, ListKind::Tuple));
      } else {
        out.push_back(name == "keys" ? k : v);
      }
    }
    return Value::list(std::move(out), name == "items"  ? ListKind::DictItems
                                       : name == "keys" ? ListKind::DictKeys
                                                        : ListKind::DictValues);
  }
  if (name == "copy") return Value::dict(d);
  if (name == "pop") {
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"key", "default"}, 1));
    if (const Value* v = d.find(*b[0])) {
      Value out = *v;
      d.erase(*b[0]);
      return out;
    }
    if (b[1]) return *b[1];
    return util::errorf("KeyError: {}", repr(*b[0]));
  }
  if (name == "setdefault") {
    interp.remember_container(self);
    HR_ASSIGN_OR_RETURN(auto b, bind_args(what, args, {"key", "default"}, 1));
    if (const Value* v = d.find(*b[0])) return *v;
    Value v = b[1] ? *b[1] : Value::none();
    d.set(*b[0], v);
    return v;
  }
  if (name == "update") {
    interp.remember_container(self);
    if (args.positional.size() > 1) return util::Error("dict.update() takes at most 1 argument");
    if (!args.positional.empty()) {
      const Value& other = args.positional[0];
      if (!other.is_dict()) return util::Error("dict.update() expects a mapping");
      for (const auto& [k, v] : other.dict().items) d.set(k, v);
    }
    for (const auto& [k, v] : args.keyword) d.set(Value::string(k), v);
    return Value::none();
  }
  if (name == "clear") {
    d.items.clear();
    return Value::none();
  }
  if (name == "popitem") {
    if (d.items.empty()) return util::Error("popitem(): dictionary is empty");
    Value out = Value::list({d.items.back().first, d.items.back().second}, ListKind::Tuple);
    d.items.pop_back();
    return out;
  }
  return unsupported_method(self, name);
}

}  // namespace

bool has_method(const Value& self, std::string_view name) {
  if (self.is_string()) return in(kStrMethods, name) || name == "zfill";
  if (self.is_dict()) return in(kDictMethods, name);
  if (self.is_list()) {
    ListKind k = self.list_kind();
    if (k == ListKind::List) return in(kListMethods, name);
    if (k == ListKind::Tuple || k == ListKind::Range) return name == "count" || name == "index";
  }
  return false;
}

// ImmutableSandboxedEnvironment's list: list.pop and list.clear are not on it, so they stay
// allowed, exactly as in jinja2.sandbox._mutable_spec.
bool is_mutating_method(const Value& self, std::string_view name) {
  if (self.is_list() && self.list_kind() == ListKind::List) {
    return name == "append" || name == "reverse" || name == "insert" || name == "sort" ||
           name == "extend" || name == "remove";
  }
  if (self.is_dict()) {
    return name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" ||
           name == "update";
  }
  return false;
}

util::Result<Value> call_method(Interpreter& interp, const Value& self, std::string_view name,
                                CallArgs& args) {
  if (self.is_string()) return str_method(interp, self, name, args);
  if (self.is_dict()) return dict_method(interp, self, name, args);
  if (self.is_list()) return list_method(interp, self, name, args);
  return unsupported_method(self, name);
}

}  // namespace chat
