// Template values with Python semantics: kinds, truthiness, equality, ordering, str() and repr().
#include "chat/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "chat/unicode.h"

namespace chat {

// ---------------------------------------------------------------------------------------------
// Construction and access

Value Value::none() {
  return Value(Kind::None);
}

Value Value::boolean(bool b) {
  Value v(Kind::Bool);
  v.data_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v(Kind::Int);
  v.data_ = i;
  return v;
}

Value Value::number(double d) {
  Value v(Kind::Float);
  v.data_ = d;
  return v;
}

Value Value::string(std::string s, bool safe) {
  Value v(Kind::String);
  v.data_ = std::make_shared<const std::string>(std::move(s));
  v.safe_ = safe;
  return v;
}

Value Value::list(std::vector<Value> items, ListKind kind) {
  Value v(Kind::List);
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->kind = kind;
  v.data_ = std::move(data);
  return v;
}

Value Value::dict(DictData data) {
  Value v(Kind::Dict);
  v.data_ = std::make_shared<DictData>(std::move(data));
  return v;
}

Value Value::object(std::shared_ptr<Object> object) {
  Value v(Kind::Object);
  v.data_ = std::move(object);
  return v;
}

Value Value::undefined(UndefinedData data) {
  Value v(Kind::Undefined);
  v.data_ = std::make_shared<const UndefinedData>(std::move(data));
  return v;
}

Value Value::undefined_name(std::string name) {
  return undefined(UndefinedData{.name = std::move(name)});
}

int64_t Value::as_int() const {
  return kind_ == Kind::Bool ? (std::get<bool>(data_) ? 1 : 0) : std::get<int64_t>(data_);
}

double Value::as_float() const {
  return kind_ == Kind::Float ? std::get<double>(data_) : static_cast<double>(as_int());
}

const UndefinedData& Value::undefined_data() const {
  static const UndefinedData kPlain;
  auto* p = std::get_if<std::shared_ptr<const UndefinedData>>(&data_);
  return p && *p ? **p : kPlain;
}

bool Value::same_as(const Value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::List:
      return &list() == &other.list();
    case Kind::Dict:
      return &dict() == &other.dict();
    case Kind::Object:
      return object() == other.object();
    case Kind::String:
      return &str() == &other.str() || str() == other.str();
    default:
      return equals(*this, other);
  }
}

std::string UndefinedData::message() const {
  if (!hint.empty()) return hint;
  if (owner_type.empty()) return fmt::format("'{}' is undefined", name);
  if (name_is_item) return fmt::format("'{}' has no element {}", owner_type, name);
  return fmt::format("'{}' has no attribute {}", owner_type, repr_string(name));
}

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void DictData::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

bool DictData::erase(const Value& key) {
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (equals(it->first, key)) {
      items.erase(it);
      return true;
    }
  }
  return false;
}

namespace {

// Containers freed while another is being freed queue their children here instead of
// destroying them recursively; the outermost destructor drains the queue.
thread_local std::vector<Value> g_teardown;
thread_local bool g_tearing_down = false;

void drain_teardown() {
  if (g_tearing_down) return;
  g_tearing_down = true;
  while (!g_teardown.empty()) {
    std::vector<Value> batch;
    batch.swap(g_teardown);
    batch.clear();  // the last reference to a container queues its children
  }
  g_tearing_down = false;
}

thread_local std::vector<const void*> g_repr_stack;

}  // namespace

ListData::~ListData() {
  for (auto& v : items) {
    if (v.is_list() || v.is_dict() || v.is_object()) g_teardown.push_back(std::move(v));
  }
  items.clear();
  drain_teardown();
}

DictData::~DictData() {
  for (auto& [k, v] : items) {
    if (v.is_list() || v.is_dict() || v.is_object()) g_teardown.push_back(std::move(v));
  }
  items.clear();
  drain_teardown();
}

ReprGuard::ReprGuard(const void* container) {
  recursive_ = g_repr_stack.size() >= static_cast<size_t>(kMaxValueDepth) ||
               std::find(g_repr_stack.begin(), g_repr_stack.end(), container) != g_repr_stack.end();
  g_repr_stack.push_back(container);
}

ReprGuard::~ReprGuard() {
  g_repr_stack.pop_back();
}

std::string Object::repr() const {
  return fmt::format("<{} object>", type_name());
}

std::optional<Value> Object::attribute(std::string_view) const {
  return std::nullopt;
}

util::Result<Value> Object::call(Interpreter&, CallArgs&) const {
  return util::errorf("'{}' object is not callable", type_name());
}

// ---------------------------------------------------------------------------------------------
// Python semantics

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return v.is_safe() ? "Markup" : "str";
    case Kind::Dict:
      return "dict";
    case Kind::Object:
      return v.object()->type_name();
    case Kind::List:
      break;
  }
  switch (v.list_kind()) {
    case ListKind::List:
      return "list";
    case ListKind::Tuple:
      return "tuple";
    case ListKind::Generator:
      return "generator";
    case ListKind::Range:
      return "range";
    case ListKind::DictKeys:
      return "dict_keys";
    case ListKind::DictValues:
      return "dict_values";
    case ListKind::DictItems:
      return "dict_items";
  }
  return "list";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return v.as_bool();
    case Kind::Int:
      return v.as_int() != 0;
    case Kind::Float:
      return v.as_float() != 0.0;
    case Kind::String:
      return !v.str().empty();
    case Kind::List:
      return v.list_kind() == ListKind::Generator || !v.list().items.empty();
    case Kind::Dict:
      return !v.dict().items.empty();
    case Kind::Object:
      return true;
  }
  return false;
}

namespace {
bool equals_at(const Value& a, const Value& b, int depth);
}  // namespace

bool equals(const Value& a, const Value& b) {
  return equals_at(a, b, 0);
}

namespace {
bool equals_at(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) return false;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.str() == b.str();
    case Kind::List: {
      if (&a.list() == &b.list()) return true;
      ListKind k = a.list_kind();
      if (k != b.list_kind()) return false;
      if (k != ListKind::List && k != ListKind::Tuple && k != ListKind::Range) return false;
      const auto& x = a.list().items;
      const auto& y = b.list().items;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals_at(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Kind::Dict: {
      const auto& x = a.dict().items;
      if (x.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.dict().find(k);
        if (!other || !equals_at(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Kind::Object:
      return a.object() == b.object();
    default:
      return false;
  }
}

util::Result<bool> less_than_at(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) return util::Error("maximum recursion depth exceeded in comparison");
  if (a.is_undefined()) return util::Error(a.undefined_data().message());
  if (b.is_undefined()) return util::Error(b.undefined_data().message());
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list() && a.list_kind() == b.list_kind() &&
      (a.list_kind() == ListKind::List || a.list_kind() == ListKind::Tuple)) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less_than_at(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  return util::errorf("'<' not supported between instances of '{}' and '{}'", type_name(a),
                      type_name(b));
}

}  // namespace

util::Result<bool> less_than(const Value& a, const Value& b) {
  return less_than_at(a, b, 0);
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, res.ptr - buf);  // shortest round-trip digits: "-1.25e+02"
  std::string out;
  if (sci.front() == '-') {
    out = "-";
    sci.remove_prefix(1);
  }
  size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exp10 = std::stoi(std::string(sci.substr(e + 1)));
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 >= 0) {
      size_t int_len = static_cast<size_t>(exp10) + 1;
      if (digits.size() <= int_len) {
        out += digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, int_len) + "." + digits.substr(int_len);
      }
    } else {
      out += "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += fmt::format("e{}{:02d}", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return out;
}

std::string repr_string(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : unicode::decode(s)) {
    if (cp == '\\') {
      out += "\\\\";
    } else if (cp == static_cast<char32_t>(quote)) {
      out += '\\';
      out += quote;
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!unicode::is_printable(cp)) {
      if (cp < 0x100) {
        out += fmt::format("\\x{:02x}", static_cast<uint32_t>(cp));
      } else if (cp < 0x10000) {
        out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
      } else {
        out += fmt::format("\\U{:08x}", static_cast<uint32_t>(cp));
      }
    } else {
      unicode::append_utf8(out, cp);
    }
  }
  out += quote;
  return out;
}

namespace {

std::string join_repr(const std::vector<Value>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += repr(items[i]);
  }
  return out;
}

std::string container_str(const Value& v) {
  ReprGuard guard(v.is_dict() ? static_cast<const void*>(&v.dict())
                              : static_cast<const void*>(&v.list()));
  if (guard.recursive()) return v.is_dict() ? "{...}" : "[...]";
  if (v.is_dict()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, val] : v.dict().items) {
      if (!first) out += ", ";
      first = false;
      out += repr(k) + ": " + repr(val);
    }
    return out + "}";
  }
  const auto& items = v.list().items;
  switch (v.list_kind()) {
    case ListKind::List:
      return "[" + join_repr(items) + "]";
    case ListKind::Tuple:
      return items.size() == 1 ? "(" + repr(items[0]) + ",)" : "(" + join_repr(items) + ")";
    case ListKind::Generator:
      return "<generator object>";
    case ListKind::Range:
      return v.list().range_repr;
    case ListKind::DictKeys:
      return "dict_keys([" + join_repr(items) + "])";
    case ListKind::DictValues:
      return "dict_values([" + join_repr(items) + "])";
    case ListKind::DictItems:
      return "dict_items([" + join_repr(items) + "])";
  }
  return "";
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return v.as_bool() ? "True" : "False";
    case Kind::Int:
      return std::to_string(v.as_int());
    case Kind::Float:
      return python_float(v.as_float());
    case Kind::String:
      return v.str();
    case Kind::List:
    case Kind::Dict:
      return container_str(v);
    case Kind::Object:
      return v.object()->repr();
  }
  return "";
}

std::string repr(const Value& v) {
  if (v.is_string()) {
    return v.is_safe() ? "Markup(" + repr_string(v.str()) + ")" : repr_string(v.str());
  }
  if (v.is_undefined()) return "Undefined";
  return to_str(v);
}

util::Result<std::vector<Value>> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return std::vector<Value>{};
    case Kind::String: {
      std::vector<Value> out;
      std::vector<size_t> at = unicode::offsets(v.str());
      for (size_t i = 0; i + 1 < at.size(); ++i) {
        out.push_back(Value::string(v.str().substr(at[i], at[i + 1] - at[i])));
      }
      return out;
    }
    case Kind::List: {
      ListData& data = v.list();
      if (data.kind == ListKind::Generator) {
        if (data.consumed) return std::vector<Value>{};
        data.consumed = true;
      }
      return data.items;
    }
    case Kind::Dict: {
      std::vector<Value> out;
      for (const auto& [k, val] : v.dict().items) out.push_back(k);
      return out;
    }
    default:
      return util::errorf("'{}' object is not iterable", type_name(v));
  }
}

util::Result<int64_t> length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return int64_t{0};
    case Kind::String:
      return static_cast<int64_t>(unicode::length(v.str()));
    case Kind::Dict:
      return static_cast<int64_t>(v.dict().items.size());
    case Kind::List:
      if (v.list_kind() != ListKind::Generator) {
        return static_cast<int64_t>(v.list().items.size());
      }
      break;
    default:
      break;
  }
  return util::errorf("object of type '{}' has no len()", type_name(v));
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace chat
