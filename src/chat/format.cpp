// Python string formatting: str.format() with its format-spec mini-language, and '%' (printf).
#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "chat/interpreter.h"
#include "chat/unicode.h"

namespace chat {
namespace {

// The parsed "[[fill]align][sign][#][0][width][,|_][.precision][type]".
struct Spec {
  std::string fill = " ";
  char align = 0;  // '<', '>', '^', '=' or 0 (the type's default)
  char sign = '-';
  bool alternate = false;
  int64_t width = 0;
  char grouping = 0;
  int precision = -1;
  char type = 0;
};

util::Result<Spec> parse_spec(std::string_view s) {
  Spec spec;
  std::vector<char32_t> cps = unicode::decode(s);
  size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (cps.size() >= 2 && is_align(cps[1])) {
    spec.fill.clear();
    unicode::append_utf8(spec.fill, cps[0]);
    spec.align = static_cast<char>(cps[1]);
    i = 2;
  } else if (!cps.empty() && is_align(cps[0])) {
    spec.align = static_cast<char>(cps[0]);
    i = 1;
  }
  if (i < cps.size() && (cps[i] == '+' || cps[i] == '-' || cps[i] == ' ')) {
    spec.sign = static_cast<char>(cps[i++]);
  }
  if (i < cps.size() && cps[i] == '#') {
    spec.alternate = true;
    ++i;
  }
  if (i < cps.size() && cps[i] == '0') {
    if (!spec.align) {
      spec.fill = "0";
      spec.align = '=';
    }
    ++i;
  }
  while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') {
    spec.width = spec.width * 10 + (cps[i++] - '0');
    if (spec.width > 100000) return util::Error("format width too large");
  }
  if (i < cps.size() && (cps[i] == ',' || cps[i] == '_'))
    spec.grouping = static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == '.') {
    ++i;
    spec.precision = 0;
    size_t start = i;
    while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') {
      spec.precision = spec.precision * 10 + static_cast<int>(cps[i++] - '0');
      if (spec.precision > 1000) return util::Error("format precision too large");
    }
    if (i == start) return util::Error("Format specifier missing precision");
  }
  if (i < cps.size()) spec.type = static_cast<char>(cps[i++]);
  if (i < cps.size()) return util::Error("Invalid format specifier");
  return spec;
}

std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    out += digits[i];
    if (sep && (n - i - 1) % 3 == 0 && i + 1 < n) out += sep;
  }
  return out;
}

std::string int_digits(int64_t v, char type, bool alternate) {
  uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
  std::string digits;
  do {
    int d = static_cast<int>(u % static_cast<uint64_t>(base));
    digits.insert(digits.begin(),
                  static_cast<char>(d < 10 ? '0' + d : (type == 'X' ? 'A' : 'a') + d - 10));
    u /= static_cast<uint64_t>(base);
  } while (u);
  if (alternate && base != 10) digits = std::string("0") + (type == 'X' ? 'X' : type) + digits;
  return digits;
}

std::string float_digits(double v, char type, int precision, bool alternate) {
  v = std::fabs(v);
  if (type == 0 && precision < 0) return python_float(v);
  if (type == '%') {
    v *= 100;
    type = 'f';
  }
  char conv = type == 0 ? 'g' : type;
  int p = precision < 0 ? 6 : precision;
  std::string fmt_str = std::string("%") + (alternate ? "#" : "") + ".*" + conv;
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt_str.c_str(), p, v);
  std::string out = buf;
  if (type == 0 && out.find_first_of(".eEn") == std::string::npos) out += ".0";
  return out;
}

std::string apply_width(std::string body, const std::string& sign, const Spec& spec,
                        char default_align) {
  char align = spec.align ? spec.align : default_align;
  auto len = static_cast<int64_t>(unicode::length(body) + unicode::length(sign));
  int64_t pad = std::max<int64_t>(0, spec.width - len);
  auto fill = [&](int64_t k) {
    std::string r;
    for (int64_t i = 0; i < k; ++i) r += spec.fill;
    return r;
  };
  switch (align) {
    case '<':
      return sign + body + fill(pad);
    case '^':
      return fill(pad / 2) + sign + body + fill(pad - pad / 2);
    case '=':
      return sign + fill(pad) + body;
    default:
      return fill(pad) + sign + body;
  }
}

util::Result<std::string> format_value(const Value& v, std::string_view spec_text) {
  if (spec_text.empty()) return to_str(v);
  HR_ASSIGN_OR_RETURN(Spec spec, parse_spec(spec_text));
  if (v.is_string()) {
    if (spec.type && spec.type != 's') {
      return util::errorf("Unknown format code '{}' for object of type 'str'", spec.type);
    }
    if (spec.sign != '-') return util::Error("Sign not allowed in string format specifier");
    std::string s = v.str();
    if (spec.precision >= 0) {
      auto cps = unicode::decode(s);
      if (cps.size() > static_cast<size_t>(spec.precision)) cps.resize(spec.precision);
      s = unicode::encode(cps);
    }
    return apply_width(s, "", spec, '<');
  }
  if (!v.is_number()) {
    return util::errorf("unsupported format string passed to {}.__format__", type_name(v));
  }
  bool as_int = v.is_integral() && std::string_view("dnbcoxX").find(spec.type ? spec.type : 'd') !=
                                       std::string_view::npos;
  std::string sign;
  bool negative = v.is_integral() ? v.as_int() < 0 : std::signbit(v.as_float());
  if (negative) {
    sign = "-";
  } else if (spec.sign == '+' || spec.sign == ' ') {
    sign = std::string(1, spec.sign);
  }
  std::string body;
  if (as_int) {
    if (spec.precision >= 0)
      return util::Error("Precision not allowed in integer format specifier");
    if (spec.type == 'c') {
      body.clear();
      unicode::append_utf8(body, static_cast<char32_t>(v.as_int()));
      sign.clear();
    } else {
      body = int_digits(v.as_int(), spec.type, spec.alternate);
      if (spec.grouping) body = group_digits(body, spec.grouping);
    }
  } else {
    if (std::string_view("eEfFgGn%").find(spec.type) == std::string_view::npos && spec.type) {
      return util::errorf("Unknown format code '{}' for object of type '{}'", spec.type,
                          type_name(v));
    }
    char t = spec.type == 'n' ? 'g' : spec.type;
    body = float_digits(v.as_float(), t, spec.precision, spec.alternate);
    if (t == '%') body += '%';
    if (spec.grouping) {
      size_t end = body.find_first_not_of("0123456789");
      body = group_digits(body.substr(0, end), spec.grouping) +
             (end == std::string::npos ? "" : body.substr(end));
    }
  }
  return apply_width(body, sign, spec, '>');
}

}  // namespace

util::Result<std::string> python_format(Interpreter& interp, std::string_view fmt,
                                        const CallArgs& args, bool escape_args) {
  std::string out;
  size_t auto_index = 0;
  bool manual = false, automatic = false;
  // Resolves "name.attr[key]" to a value.
  auto field_value = [&](std::string_view field) -> util::Result<Value> {
    size_t end = field.find_first_of(".[");
    std::string_view head = field.substr(0, end);
    Value v;
    if (head.empty()) {
      if (manual) {
        return util::Error(
            "cannot switch from manual field specification to automatic field "
            "numbering");
      }
      automatic = true;
      if (auto_index >= args.positional.size()) {
        return util::errorf("Replacement index {} out of range for positional args tuple",
                            auto_index);
      }
      v = args.positional[auto_index++];
    } else if (head.find_first_not_of("0123456789") == std::string_view::npos) {
      if (automatic) {
        return util::Error(
            "cannot switch from automatic field numbering to manual field "
            "specification");
      }
      manual = true;
      size_t i = std::stoul(std::string(head));
      if (i >= args.positional.size()) {
        return util::errorf("Replacement index {} out of range for positional args tuple", i);
      }
      v = args.positional[i];
    } else {
      bool found = false;
      for (const auto& [k, val] : args.keyword) {
        if (k == head) {
          v = val;
          found = true;
        }
      }
      if (!found) return util::errorf("KeyError: '{}'", head);
    }
    while (end != std::string_view::npos && end < field.size()) {
      if (field[end] == '.') {
        size_t next = field.find_first_of(".[", end + 1);
        HR_ASSIGN_OR_RETURN(v, interp.get_attr(v, field.substr(end + 1, next - end - 1)));
        end = next;
      } else {
        size_t close = field.find(']', end);
        if (close == std::string_view::npos) return util::Error("Missing ']' in format string");
        std::string key(field.substr(end + 1, close - end - 1));
        Value k = key.find_first_not_of("0123456789") == std::string::npos && !key.empty()
                      ? Value::integer(std::stoll(key))
                      : Value::string(key);
        HR_ASSIGN_OR_RETURN(v, interp.get_item(v, k));
        end = close + 1;
      }
    }
    return v;
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      return util::Error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t depth = 1, j = i + 1;
    for (; j < fmt.size() && depth; ++j) {
      if (fmt[j] == '{') ++depth;
      if (fmt[j] == '}') --depth;
    }
    if (depth) return util::Error("expected '}' before end of string");
    std::string_view field = fmt.substr(i + 1, j - i - 2);
    i = j - 1;
    size_t colon = field.find(':'), bang = field.find('!');
    if (bang != std::string_view::npos && colon != std::string_view::npos && bang > colon) {
      bang = std::string_view::npos;
    }
    std::string_view name = field.substr(0, std::min(colon, bang));
    char conversion =
        bang != std::string_view::npos && bang + 1 < field.size() ? field[bang + 1] : 0;
    std::string spec;
    if (colon != std::string_view::npos) {  // nested fields inside the spec, e.g. {:{width}}
      HR_ASSIGN_OR_RETURN(spec, python_format(interp, field.substr(colon + 1), args, false));
    }
    HR_ASSIGN_OR_RETURN(Value v, field_value(name));
    if (conversion == 'r' || conversion == 'a') {
      v = Value::string(repr(v));
    } else if (conversion == 's') {
      v = Value::string(to_str(v));
    } else if (conversion) {
      return util::errorf("Unknown conversion specifier {}", conversion);
    }
    HR_ASSIGN_OR_RETURN(std::string text, format_value(v, spec));
    out += escape_args && !v.is_safe() ? html_escape(text) : text;
    HR_TRY(interp.check_size(out.size()));
  }
  return out;
}

util::Result<std::string> percent_format(std::string_view fmt, const Value& args,
                                         bool escape_args) {
  std::vector<Value> values;
  const DictData* mapping = args.is_dict() ? &args.dict() : nullptr;
  if (args.is_list() && args.list_kind() == ListKind::Tuple) {
    values = args.list().items;
  } else {
    values.push_back(args);
  }
  size_t next = 0;
  std::string out;
  auto take = [&]() -> util::Result<Value> {
    if (next >= values.size()) return util::Error("not enough arguments for format string");
    return values[next++];
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) return util::Error("incomplete format");
    std::optional<Value> value;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string_view::npos) return util::Error("incomplete format key");
      if (!mapping) return util::Error("format requires a mapping");
      const Value* v = mapping->find(fmt.substr(i + 1, close - i - 1));
      if (!v) return util::errorf("KeyError: '{}'", fmt.substr(i + 1, close - i - 1));
      value = *v;
      i = close + 1;
    }
    Spec spec;
    bool left = false, zero = false;
    for (; i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos;
         ++i) {
      if (fmt[i] == '-') left = true;
      if (fmt[i] == '0') zero = true;
      if (fmt[i] == '+' || (fmt[i] == ' ' && spec.sign != '+')) spec.sign = fmt[i];
      if (fmt[i] == '#') spec.alternate = true;
    }
    auto number = [&](int64_t& target) -> util::Status {
      if (i < fmt.size() && fmt[i] == '*') {
        HR_ASSIGN_OR_RETURN(Value w, take());
        if (!w.is_integral()) return util::Error("* wants int");
        target = w.as_int();
        ++i;
        return {};
      }
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        target = target * 10 + (fmt[i++] - '0');
        if (target > 100000) return util::Error("format width too large");
      }
      return {};
    };
    HR_TRY(number(spec.width));
    if (spec.width < 0) {
      left = true;
      spec.width = -spec.width;
    }
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      int64_t p = 0;
      HR_TRY(number(p));
      spec.precision = static_cast<int>(p);
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) return util::Error("incomplete format");
    char type = fmt[i];
    if (type == '%') {
      out += '%';
      continue;
    }
    if (!value) {
      HR_ASSIGN_OR_RETURN(value, take());
    }
    const Value& v = *value;
    std::string body, sign;
    bool numeric = true;
    if (type == 's' || type == 'r' || type == 'a') {
      body = type == 's' ? to_str(v) : repr(v);
      if (spec.precision >= 0) {
        auto cps = unicode::decode(body);
        if (cps.size() > static_cast<size_t>(spec.precision)) cps.resize(spec.precision);
        body = unicode::encode(cps);
      }
      if (escape_args && !v.is_safe()) body = html_escape(body);
      numeric = false;
    } else if (type == 'c') {
      if (v.is_string() && unicode::length(v.str()) == 1) {
        body = v.str();
      } else if (v.is_integral()) {
        unicode::append_utf8(body, static_cast<char32_t>(v.as_int()));
      } else {
        return util::Error("%c requires int or char");
      }
      numeric = false;
    } else if (std::string_view("diuoxXeEfFgG").find(type) != std::string_view::npos) {
      if (!v.is_number()) {
        return util::errorf("%{} format: a {} is required, not {}", type,
                            std::string_view("oxX").find(type) != std::string_view::npos
                                ? "an integer"
                                : "a real number",
                            type_name(v));
      }
      bool negative = v.is_float() ? std::signbit(v.as_float()) : v.as_int() < 0;
      if (negative)
        sign = "-";
      else if (spec.sign != '-')
        sign = std::string(1, spec.sign);
      if (std::string_view("diu").find(type) != std::string_view::npos) {
        int64_t iv = v.is_float() ? static_cast<int64_t>(v.as_float()) : v.as_int();
        if (v.is_float() && std::trunc(v.as_float()) == 0)
          sign = spec.sign != '-' ? std::string(1, spec.sign) : "";
        body = int_digits(iv, 'd', false);
        if (spec.precision > static_cast<int>(body.size())) {
          body = std::string(spec.precision - body.size(), '0') + body;
        }
      } else if (std::string_view("oxX").find(type) != std::string_view::npos) {
        if (v.is_float())
          return util::errorf("%{} format: an integer is required, not float", type);
        body = int_digits(v.as_int(), type, spec.alternate);
      } else {
        body = float_digits(v.as_float(), type, spec.precision < 0 ? 6 : spec.precision,
                            spec.alternate);
      }
    } else {
      return util::errorf("unsupported format character '{}'", type);
    }
    Spec layout;
    layout.width = spec.width;
    layout.align = left ? '<' : (zero && numeric ? '=' : '>');
    layout.fill = zero && numeric && !left ? "0" : " ";
    out += apply_width(body, sign, layout, '>');
  }
  if (!mapping && next < values.size()) {
    return util::Error("not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace chat
