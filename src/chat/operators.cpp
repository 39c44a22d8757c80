// Python operators on values: arithmetic, membership, attribute and item lookup, slicing.
#include <fmt/format.h>

#include <cmath>

#include "chat/interpreter.h"
#include "chat/objects.h"
#include "chat/unicode.h"

namespace chat {
namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "+";
    case BinaryOp::Sub:
      return "-";
    case BinaryOp::Mul:
      return "*";
    case BinaryOp::Div:
      return "/";
    case BinaryOp::FloorDiv:
      return "//";
    case BinaryOp::Mod:
      return "%";
    case BinaryOp::Pow:
      return "**";
  }
  return "?";
}

util::Error unsupported(BinaryOp op, const Value& a, const Value& b) {
  return util::errorf("unsupported operand type(s) for {}: '{}' and '{}'", op_symbol(op),
                      type_name(a), type_name(b));
}

util::Error overflow() {
  return util::Error("integer result does not fit in 64 bits");
}

// Python's floor division and modulo on integers (the result takes the divisor's sign).
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

util::Result<Value> arithmetic(BinaryOp op, const Value& a, const Value& b) {
  bool floats = a.is_float() || b.is_float();
  if (op == BinaryOp::Div) {
    if (b.as_float() == 0.0) return util::Error("division by zero");
    return Value::number(a.as_float() / b.as_float());
  }
  if (floats) {
    double x = a.as_float(), y = b.as_float();
    switch (op) {
      case BinaryOp::Add:
        return Value::number(x + y);
      case BinaryOp::Sub:
        return Value::number(x - y);
      case BinaryOp::Mul:
        return Value::number(x * y);
      case BinaryOp::FloorDiv:
        if (y == 0.0) return util::Error("float floor division by zero");
        return Value::number(std::floor(x / y));
      case BinaryOp::Mod: {
        if (y == 0.0) return util::Error("float modulo");
        double m = std::fmod(x, y);
        if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
        return Value::number(m);
      }
      case BinaryOp::Pow:
        return Value::number(std::pow(x, y));
      default:
        break;
    }
  }
  int64_t x = a.as_int(), y = b.as_int(), r = 0;
  switch (op) {
    case BinaryOp::Add:
      if (__builtin_add_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    case BinaryOp::Sub:
      if (__builtin_sub_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    case BinaryOp::Mul:
      if (__builtin_mul_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    case BinaryOp::FloorDiv:
    case BinaryOp::Mod:
      if (y == 0) return util::Error("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) return overflow();
      return Value::integer(op == BinaryOp::FloorDiv ? floor_div(x, y) : floor_mod(x, y));
    case BinaryOp::Pow: {
      if (y < 0) return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t result = 1, base = x;
      while (y > 0) {
        if ((y & 1) && __builtin_mul_overflow(result, base, &result)) return overflow();
        y >>= 1;
        if (y > 0 && __builtin_mul_overflow(base, base, &base)) return overflow();
      }
      return Value::integer(result);
    }
    default:
      break;
  }
  return util::Error("bad arithmetic operator");
}

util::Result<Value> repeat(const Value& seq, int64_t n, size_t max_bytes) {
  if (seq.is_string()) {
    if (n <= 0) return Value::string("", seq.is_safe());
    if (seq.str().size() * static_cast<size_t>(n) > max_bytes) {
      return util::errorf("string repetition larger than the {} MiB limit", max_bytes >> 20);
    }
    std::string out;
    out.reserve(seq.str().size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::string(std::move(out), seq.is_safe());
  }
  const auto& items = seq.list().items;
  std::vector<Value> out;
  if (n > 0) {
    if (items.size() * static_cast<size_t>(n) > max_bytes / 16) {
      return util::Error("list repetition too large");
    }
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  }
  return Value::list(std::move(out), seq.list_kind());
}

bool repeatable(const Value& v) {
  return v.is_string() ||
         (v.is_list() && (v.list_kind() == ListKind::List || v.list_kind() == ListKind::Tuple));
}

}  // namespace

util::Result<Value> binary_op(BinaryOp op, const Value& a, const Value& b, size_t max_bytes) {
  if (a.is_undefined()) return util::Error(a.undefined_data().message());
  if (b.is_undefined()) return util::Error(b.undefined_data().message());
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == BinaryOp::Add) {
    if (a.is_string() && b.is_string()) {
      // Markup + str escapes the str, and so does str + Markup (Markup.__radd__).
      bool safe = a.is_safe() || b.is_safe();
      std::string left = safe && !a.is_safe() ? html_escape(a.str()) : a.str();
      std::string right = safe && !b.is_safe() ? html_escape(b.str()) : b.str();
      if (left.size() + right.size() > max_bytes) {
        return util::errorf("string larger than the {} MiB limit", max_bytes >> 20);
      }
      return Value::string(left + right, safe);
    }
    if (a.is_list() && b.is_list() && a.list_kind() == b.list_kind() &&
        (a.list_kind() == ListKind::List || a.list_kind() == ListKind::Tuple)) {
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::list(std::move(items), a.list_kind());
    }
    if (a.is_string()) {
      return util::errorf("can only concatenate str (not \"{}\") to str", type_name(b));
    }
    if (a.is_list() && a.list_kind() == ListKind::List) {
      return util::errorf("can only concatenate list (not \"{}\") to list", type_name(b));
    }
    return unsupported(op, a, b);
  }
  if (op == BinaryOp::Mul) {
    if (repeatable(a) && b.is_integral()) return repeat(a, b.as_int(), max_bytes);
    if (repeatable(b) && a.is_integral()) return repeat(b, a.as_int(), max_bytes);
    return unsupported(op, a, b);
  }
  if (op == BinaryOp::Mod && a.is_string()) {
    HR_ASSIGN_OR_RETURN(std::string text, percent_format(a.str(), b, a.is_safe()));
    return Value::string(std::move(text), a.is_safe());
  }
  return unsupported(op, a, b);
}

util::Result<bool> contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined:
      return false;
    case Kind::String:
      if (!item.is_string()) {
        return util::errorf("'in <string>' requires string as left operand, not {}",
                            type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::Dict:
      return container.dict().find(item) != nullptr;
    case Kind::List: {
      HR_ASSIGN_OR_RETURN(auto items, iterate(container));
      for (const auto& v : items) {
        if (equals(v, item)) return true;
      }
      return false;
    }
    default:
      return util::errorf("argument of type '{}' is not iterable", type_name(container));
  }
}

std::string undefined_owner(const Value& obj) {
  if (obj.is_none()) return "None";
  if (obj.is_string() && obj.is_safe()) return "markupsafe.Markup object";
  if (obj.is_object()) {
    std::string t = obj.object()->type_name();
    if (t == "Namespace") return "jinja2.utils.Namespace object";
    if (t == "LoopContext" || t == "Macro") return "jinja2.runtime." + t + " object";
    return t + " object";
  }
  return type_name(obj) + " object";
}

namespace {

Value missing(const Value& obj, const Value& key) {
  UndefinedData d{.owner_type = undefined_owner(obj)};
  if (key.is_string()) {
    d.name = key.str();
  } else {
    d.name = repr(key);
    d.name_is_item = true;
  }
  return Value::undefined(std::move(d));
}

Value blocked(const Value& obj, std::string_view name) {
  return Value::undefined(UndefinedData{
      .name = std::string(name),
      .hint =
          fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(obj)),
      .security = true});
}

// The Python attribute `name` of a str, list, dict or number: a bound method, if any.
std::optional<Value> python_attribute(const Value& obj, std::string_view name, bool mutable_ok) {
  if (name.substr(0, 2) == "__") return blocked(obj, name);
  if (!has_method(obj, name)) return std::nullopt;
  if (!mutable_ok && is_mutating_method(obj, name)) return blocked(obj, name);
  return Value::object(std::make_shared<BoundMethod>(obj, std::string(name)));
}

}  // namespace

// Jinja's environment.getattr: the Python attribute first, then the item of that name.
util::Result<Value> Interpreter::get_attr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return util::Error(obj.undefined_data().message());
  if (obj.is_object()) {
    if (auto v = obj.object()->attribute(name)) return *v;
  } else if (auto v = python_attribute(obj, name, options_.mutable_sandbox)) {
    return *v;
  } else if (obj.is_dict()) {
    if (const Value* item = obj.dict().find(name)) return *item;
  }
  return missing(obj, Value::string(std::string(name)));
}

// Jinja's environment.getitem: the item first, then (for string keys) the attribute.
util::Result<Value> Interpreter::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return util::Error(obj.undefined_data().message());
  if (key.is_integral()) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      std::vector<size_t> at = unicode::offsets(obj.str());
      auto n = static_cast<int64_t>(at.size()) - 1;
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        auto k = static_cast<size_t>(i);
        return Value::string(obj.str().substr(at[k], at[k + 1] - at[k]), obj.is_safe());
      }
      return missing(obj, key);
    }
    if (obj.is_list()) {
      ListKind kind = obj.list_kind();
      if (kind == ListKind::List || kind == ListKind::Tuple || kind == ListKind::Range) {
        const auto& items = obj.list().items;
        auto n = static_cast<int64_t>(items.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
      }
      return missing(obj, key);
    }
  }
  if (obj.is_dict()) {
    if (key.is_dict() || (key.is_list() && key.list_kind() != ListKind::Tuple)) {
      return missing(obj, key);  // unhashable: TypeError, which Jinja turns into undefined
    }
    if (const Value* v = obj.dict().find(key)) return *v;
  }
  if (!key.is_string()) return missing(obj, key);
  if (obj.is_object()) {
    if (auto v = obj.object()->attribute(key.str())) return *v;
    return missing(obj, key);
  }
  if (auto v = python_attribute(obj, key.str(), options_.mutable_sandbox)) return *v;
  return missing(obj, key);
}

util::Result<Value> slice(const Value& obj, const Value& start, const Value& stop,
                          const Value& step) {
  if (obj.is_undefined()) return util::Error(obj.undefined_data().message());
  for (const Value* v : {&start, &stop, &step}) {
    if (!v->is_none() && !v->is_integral()) return missing(obj, Value::string("slice"));
  }
  int64_t st = step.is_none() ? 1 : step.as_int();
  if (st == 0) return util::Error("slice step cannot be zero");
  bool is_str = obj.is_string();
  bool is_seq =
      obj.is_list() && (obj.list_kind() == ListKind::List || obj.list_kind() == ListKind::Tuple ||
                        obj.list_kind() == ListKind::Range);
  if (!is_str && !is_seq) return missing(obj, Value::string("slice"));
  std::vector<char32_t> cps;
  if (is_str) cps = unicode::decode(obj.str());
  auto n = static_cast<int64_t>(is_str ? cps.size() : obj.list().items.size());
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](const Value& v, int64_t if_none) {
    if (v.is_none()) return if_none;
    int64_t i = v.as_int();
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  int64_t b = adjust(start, st < 0 ? n - 1 : 0);
  int64_t e = adjust(stop, st < 0 ? -1 : n);
  std::vector<int64_t> picks;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) picks.push_back(i);
  if (is_str) {
    std::string out;
    for (int64_t i : picks) unicode::append_utf8(out, cps[static_cast<size_t>(i)]);
    return Value::string(std::move(out), obj.is_safe());
  }
  std::vector<Value> items;
  for (int64_t i : picks) items.push_back(obj.list().items[static_cast<size_t>(i)]);
  Value out = Value::list(std::move(items), obj.list_kind());
  if (obj.list_kind() == ListKind::Range) {
    const auto& it = out.list().items;
    int64_t first = it.empty() ? 0 : it.front().as_int();
    int64_t stride = it.size() > 1 ? it[1].as_int() - first : 1;
    int64_t end = it.empty() ? 0 : it.back().as_int() + stride;
    out.list().range_repr = stride == 1 ? fmt::format("range({}, {})", first, end)
                                        : fmt::format("range({}, {}, {})", first, end, stride);
  }
  return out;
}

}  // namespace chat
