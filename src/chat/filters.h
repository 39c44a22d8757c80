// Filter implementations shared between filters.cpp and filters_text.cpp (internal).
#pragma once

#include <optional>
#include <string_view>

#include "chat/interpreter.h"

namespace chat::filters {

using FilterFn = util::Result<Value> (*)(Interpreter&, const Value&, CallArgs&);

// Jinja's soft_str: strings (and Markup) stay as they are, anything else becomes str(v).
inline Value soft_str(const Value& v) {
  return v.is_string() ? v : Value::string(to_str(v));
}

inline bool flag(const std::optional<Value>& v) {
  return v && truthy(*v);
}

inline util::Result<int64_t> int_arg(std::string_view what, const std::optional<Value>& v,
                                     int64_t fallback) {
  if (!v) return fallback;
  if (!v->is_integral()) {
    return util::errorf("{}: '{}' object cannot be interpreted as an integer", what, type_name(*v));
  }
  return v->as_int();
}

// Python int(str, base) / float(str): surrounding whitespace and '_' between digits allowed.
// filters_text.cpp
util::Result<Value> f_tojson(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_trim(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_upper(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_lower(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_title(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_string(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_safe(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_escape(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_forceescape(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_replace(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_indent(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_center(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_capitalize(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_wordcount(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_truncate(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_striptags(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_format(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_int(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_float(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_abs(Interpreter& in, const Value& v, CallArgs& args);
util::Result<Value> f_round(Interpreter& in, const Value& v, CallArgs& args);

}  // namespace chat::filters
