// JSON in and out: variables from nlohmann JSON, and json.dumps as HF's tojson calls it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "chat/interpreter.h"
#include "chat/unicode.h"

namespace chat {
namespace {

constexpr int kMaxJsonDepth = 512;  // deeper means a container that contains itself

void quote(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (char32_t cp : unicode::decode(s)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
          if (cp >= 0x10000) {  // surrogate pair, as Python writes it
            char32_t v = cp - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", static_cast<uint32_t>(0xD800 + (v >> 10)),
                               static_cast<uint32_t>(0xDC00 + (v & 0x3FF)));
          } else {
            out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
          }
        } else {
          unicode::append_utf8(out, cp);
        }
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return python_float(d);
}

util::Result<std::string> key_text(const Value& k) {
  if (k.is_string()) return k.str();
  if (k.is_bool()) return std::string(k.as_bool() ? "true" : "false");
  if (k.is_int()) return std::to_string(k.as_int());
  if (k.is_float()) return json_float(k.as_float());
  if (k.is_none()) return std::string("null");
  return util::errorf("keys must be str, int, float, bool or None, not {}", type_name(k));
}

class Writer {
 public:
  explicit Writer(const JsonOptions& o) : o_(o) {}

  util::Status write(const Value& v, int depth) {
    if (depth > kMaxJsonDepth) return util::Error("Circular reference detected");
    switch (v.kind()) {
      case Kind::None:
        out_ += "null";
        return {};
      case Kind::Bool:
        out_ += v.as_bool() ? "true" : "false";
        return {};
      case Kind::Int:
        out_ += std::to_string(v.as_int());
        return {};
      case Kind::Float:
        out_ += json_float(v.as_float());
        return {};
      case Kind::String:
        quote(out_, v.str(), o_.ensure_ascii);
        return {};
      case Kind::List: {
        ListKind k = v.list_kind();
        if (k != ListKind::List && k != ListKind::Tuple) break;
        const auto& items = v.list().items;
        if (items.empty()) {
          out_ += "[]";
          return {};
        }
        out_ += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          out_ += i ? o_.item_separator : "";
          newline(depth + 1);
          HR_TRY(write(items[i], depth + 1));
        }
        newline(depth);
        out_ += ']';
        return {};
      }
      case Kind::Dict: {
        std::vector<std::pair<std::string, const Value*>> entries;
        for (const auto& [k, val] : v.dict().items) {
          HR_ASSIGN_OR_RETURN(std::string key, key_text(k));
          entries.emplace_back(std::move(key), &val);
        }
        if (entries.empty()) {
          out_ += "{}";
          return {};
        }
        if (o_.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out_ += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          out_ += i ? o_.item_separator : "";
          newline(depth + 1);
          quote(out_, entries[i].first, o_.ensure_ascii);
          out_ += o_.key_separator;
          HR_TRY(write(*entries[i].second, depth + 1));
        }
        newline(depth);
        out_ += '}';
        return {};
      }
      default:
        break;
    }
    return util::errorf("Object of type {} is not JSON serializable", type_name(v));
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(int depth) {
    if (!o_.indent) return;
    out_ += '\n';
    for (int i = 0; i < depth; ++i) out_ += *o_.indent;
  }

  const JsonOptions& o_;
  std::string out_;
};

}  // namespace

namespace {

util::Result<Value> from_json_at(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxValueDepth) {
    return util::errorf("data nested deeper than {} levels", kMaxValueDepth);
  }
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      auto u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::integer(static_cast<int64_t>(u));
      return Value::number(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        HR_ASSIGN_OR_RETURN(Value v, from_json_at(e, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      DictData d;
      d.items.reserve(j.size());
      for (const auto& [k, e] : j.items()) {
        HR_ASSIGN_OR_RETURN(Value v, from_json_at(e, depth + 1));
        d.items.emplace_back(Value::string(k), std::move(v));
      }
      return Value::dict(std::move(d));
    }
    default:
      return Value::none();
  }
}

}  // namespace

util::Result<Value> from_json(const nlohmann::ordered_json& j) {
  return from_json_at(j, 0);
}

util::Result<std::string> to_json(const Value& v, const JsonOptions& options) {
  Writer w(options);
  HR_TRY(w.write(v, 0));
  return w.take();
}

}  // namespace chat
