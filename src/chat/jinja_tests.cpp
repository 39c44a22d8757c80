// Jinja's tests, the right-hand side of `x is NAME`: defined, none, string, mapping, even …
#include <fmt/format.h>

#include <cmath>

#include "chat/interpreter.h"
#include "chat/unicode.h"

namespace chat {
namespace {

bool is_sequence(const Value& v) {
  // Jinja: len(v) and v.__getitem__ both exist. Undefined has both (len 0), so it counts.
  if (v.is_undefined() || v.is_string() || v.is_dict()) return true;
  if (!v.is_list()) return false;
  ListKind k = v.list_kind();
  return k == ListKind::List || k == ListKind::Tuple || k == ListKind::Range;
}

util::Result<Value> one_arg(std::string_view name, const CallArgs& args) {
  if (args.positional.size() + args.keyword.size() != 1) {
    return util::errorf("test '{}' takes exactly one argument", name);
  }
  return args.positional.empty() ? args.keyword[0].second : args.positional[0];
}

util::Status no_args(std::string_view name, const CallArgs& args) {
  if (!args.positional.empty() || !args.keyword.empty()) {
    return util::errorf("test '{}' takes no arguments", name);
  }
  return {};
}

util::Result<int64_t> mod(const Value& v, const Value& m) {
  if (v.is_undefined()) return util::Error(v.undefined_data().message());
  if (!v.is_number() || !m.is_number()) {
    return util::errorf("unsupported operand type(s) for %: '{}' and '{}'", type_name(v),
                        type_name(m));
  }
  if (v.is_float() || m.is_float()) {
    if (m.as_float() == 0) return util::Error("float modulo");
    return std::fmod(v.as_float(), m.as_float()) == 0 ? 0 : 1;
  }
  if (m.as_int() == 0) return util::Error("integer division or modulo by zero");
  return v.as_int() % m.as_int();
}

}  // namespace

util::Result<bool> Interpreter::apply_test(std::string_view name, const Value& v, CallArgs& args) {
  // Tests of the value alone.
  struct Unary {
    std::string_view name;
    bool (*fn)(const Value&);
  };
  static const Unary kUnary[] = {
      {"defined", [](const Value& x) { return !x.is_undefined(); }},
      {"undefined", [](const Value& x) { return x.is_undefined(); }},
      {"none", [](const Value& x) { return x.is_none(); }},
      {"boolean", [](const Value& x) { return x.is_bool(); }},
      {"true", [](const Value& x) { return x.is_bool() && x.as_bool(); }},
      {"false", [](const Value& x) { return x.is_bool() && !x.as_bool(); }},
      {"integer", [](const Value& x) { return x.is_int(); }},
      {"float", [](const Value& x) { return x.is_float(); }},
      {"number", [](const Value& x) { return x.is_number(); }},
      {"string", [](const Value& x) { return x.is_string(); }},
      {"mapping", [](const Value& x) { return x.is_dict(); }},
      {"sequence", is_sequence},
      {"iterable",
       [](const Value& x) {
         return x.is_undefined() || x.is_string() || x.is_list() || x.is_dict();
       }},
      {"callable",
       [](const Value& x) {
         return x.is_undefined() || (x.is_object() && x.object()->callable());
       }},
      {"escaped", [](const Value& x) { return x.is_string() && x.is_safe(); }},
      {"lower", [](const Value& x) { return unicode::is_lower(to_str(x)); }},
      {"upper", [](const Value& x) { return unicode::is_upper(to_str(x)); }},
  };
  for (const auto& t : kUnary) {
    if (t.name == name) {
      HR_TRY(no_args(name, args));
      return t.fn(v);
    }
  }
  if (name == "even" || name == "odd") {
    HR_TRY(no_args(name, args));
    HR_ASSIGN_OR_RETURN(int64_t m, mod(v, Value::integer(2)));
    return (m == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    HR_ASSIGN_OR_RETURN(Value n, one_arg(name, args));
    HR_ASSIGN_OR_RETURN(int64_t m, mod(v, n));
    return m == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") {
    HR_ASSIGN_OR_RETURN(Value other, one_arg(name, args));
    return equals(v, other);
  }
  if (name == "ne" || name == "!=") {
    HR_ASSIGN_OR_RETURN(Value other, one_arg(name, args));
    return !equals(v, other);
  }
  if (name == "lt" || name == "lessthan" || name == "<" || name == "gt" || name == "greaterthan" ||
      name == ">") {
    HR_ASSIGN_OR_RETURN(Value other, one_arg(name, args));
    bool lt = name == "lt" || name == "lessthan" || name == "<";
    return lt ? less_than(v, other) : less_than(other, v);
  }
  if (name == "le" || name == "<=" || name == "ge" || name == ">=") {
    HR_ASSIGN_OR_RETURN(Value other, one_arg(name, args));
    bool le = name == "le" || name == "<=";
    HR_ASSIGN_OR_RETURN(bool strict, le ? less_than(other, v) : less_than(v, other));
    return !strict;
  }
  if (name == "in") {
    HR_ASSIGN_OR_RETURN(Value seq, one_arg(name, args));
    return contains(seq, v);
  }
  if (name == "sameas") {
    HR_ASSIGN_OR_RETURN(Value other, one_arg(name, args));
    if (v.is_bool() || other.is_bool() || v.is_none() || other.is_none()) {
      return v.kind() == other.kind() && equals(v, other);
    }
    return v.same_as(other);
  }
  if (name == "filter" || name == "test") {
    HR_TRY(no_args(name, args));
    if (!v.is_string()) return false;
    if (name == "test") {
      static constexpr std::string_view kNames[] = {
          "defined", "undefined",   "none",   "boolean", "true",     "false",       "integer",
          "float",   "number",      "string", "mapping", "sequence", "iterable",    "callable",
          "escaped", "lower",       "upper",  "even",    "odd",      "divisibleby", "eq",
          "equalto", "==",          "ne",     "!=",      "lt",       "lessthan",    "<",
          "gt",      "greaterthan", ">",      "le",      "<=",       "ge",          ">=",
          "in",      "sameas",      "filter", "test"};
      for (std::string_view n : kNames) {
        if (n == v.str()) return true;
      }
      return false;
    }
    return is_filter_name(v.str());
  }
  return util::errorf("unknown test '{}' — {}", name, kUnsupportedHint);
}

}  // namespace chat
