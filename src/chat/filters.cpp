// Jinja's built-in filters (`x | name(args)`), each following jinja2/filters.py's behaviour.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/filters.h"
#include "chat/unicode.h"

namespace chat {
namespace filters {
namespace {

// Jinja filters this renderer does not implement: using one is an "unsupported" error.
constexpr std::string_view kUnsupportedFilters[] = {
    "filesizeformat", "groupby", "pprint", "random", "urlencode", "urlize", "wordwrap", "xmlattr"};

const std::string kDot = ".";    // attribute paths: "tags.0"
const std::string kComma = ",";  // sort(attribute="age,name")

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
    for (const auto& p : unicode::split(attribute->str(), &kDot, -1)) {
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

util::Result<Value> f_length(Interpreter&, const Value& v, CallArgs& args) {
  HR_TRY(bind_args("length", args, {}));
  HR_ASSIGN_OR_RETURN(int64_t n, length(v));
  return Value::integer(n);
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
        b[2]->is_string() ? unicode::split(b[2]->str(), &kComma, -1) : std::vector<std::string>{};
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
    {"lower", f_lower},
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
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace
}  // namespace filters

bool is_filter_name(std::string_view name) {
  for (const auto& f : filters::kFilters) {
    if (f.name == name) return true;
  }
  for (std::string_view n : filters::kUnsupportedFilters) {
    if (n == name) return true;
  }
  return false;
}

util::Result<Value> Interpreter::apply_filter(std::string_view name, const Value& value,
                                              CallArgs& args) {
  for (const auto& f : filters::kFilters) {
    if (f.name == name) return f.fn(*this, value, args);
  }
  for (std::string_view n : filters::kUnsupportedFilters) {
    if (n == name) return util::errorf("unsupported filter '{}' — {}", name, kUnsupportedHint);
  }
  return util::errorf("no filter named '{}' — {}", name, kUnsupportedHint);
}

}  // namespace chat
