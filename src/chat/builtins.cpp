// Global functions: Jinja's range/dict/namespace and Hugging Face's raise_exception/strftime_now.
#include <fmt/format.h>

#include "chat/objects.h"

namespace chat {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

util::Result<Value> range(Interpreter&, CallArgs& args) {
  if (!args.keyword.empty()) return util::Error("range() takes no keyword arguments");
  const auto& a = args.positional;
  if (a.empty() || a.size() > 3) {
    return util::errorf("range expected 1 to 3 arguments, got {}", a.size());
  }
  for (const auto& v : a) {
    if (!v.is_integral()) {
      return util::errorf("'{}' object cannot be interpreted as an integer", type_name(v));
    }
  }
  int64_t start = a.size() > 1 ? a[0].as_int() : 0;
  int64_t stop = a.size() > 1 ? a[1].as_int() : a[0].as_int();
  int64_t step = a.size() > 2 ? a[2].as_int() : 1;
  if (step == 0) return util::Error("range() arg 3 must not be zero");
  // Count without overflow: the sandbox refuses long ranges before building them.
  long double span =
      step > 0 ? static_cast<long double>(stop) - start : static_cast<long double>(start) - stop;
  long double count = span <= 0 ? 0
                                : (span + std::abs(static_cast<long double>(step)) - 1) /
                                      std::abs(static_cast<long double>(step));
  if (count > kMaxRange) {
    return util::Error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
    items.push_back(Value::integer(start + i * step));
  }
  Value out = Value::list(std::move(items), ListKind::Range);
  out.list().range_repr = step == 1 ? fmt::format("range({}, {})", start, stop)
                                    : fmt::format("range({}, {}, {})", start, stop, step);
  return out;
}

util::Status fill_from(DictData& d, const CallArgs& args, std::string_view what) {
  if (args.positional.size() > 1) {
    return util::errorf("{} expected at most 1 positional argument, got {}", what,
                        args.positional.size());
  }
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict().items) d.set(k, v);
    } else {
      HR_ASSIGN_OR_RETURN(auto pairs, iterate(src));
      for (const auto& p : pairs) {
        HR_ASSIGN_OR_RETURN(auto kv, iterate(p));
        if (kv.size() != 2) return util::errorf("{}: each item must be a (key, value) pair", what);
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.set(Value::string(k), v);
  return {};
}

util::Result<Value> dict(Interpreter&, CallArgs& args) {
  DictData d;
  HR_TRY(fill_from(d, args, "dict()"));
  return Value::dict(std::move(d));
}

util::Result<Value> make_namespace(Interpreter& interp, CallArgs& args) {
  auto ns = std::make_shared<Namespace>();
  HR_TRY(fill_from(ns->attrs, args, "namespace()"));
  Value v = Value::object(std::move(ns));
  interp.remember_container(v);
  return v;
}

util::Result<Value> raise_exception(Interpreter& interp, CallArgs& args) {
  if (args.positional.size() != 1 || !args.keyword.empty()) {
    return util::Error("raise_exception() takes exactly one argument, the message");
  }
  return interp.raise(to_str(args.positional[0]));
}

util::Result<Value> strftime_now(Interpreter& interp, CallArgs& args) {
  if (args.positional.size() != 1 || !args.positional[0].is_string() || !args.keyword.empty()) {
    return util::Error("strftime_now() takes one string argument, the format");
  }
  std::tm now{};
  if (interp.options().now) {
    now = *interp.options().now;
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  return Value::string(strftime(args.positional[0].str(), now));
}

util::Result<Value> unsupported_global(std::string_view name) {
  return util::errorf("unsupported global function '{}' — {}", name, kUnsupportedHint);
}

}  // namespace

// C-locale strftime, written out so the result never depends on the process locale.
std::string strftime(std::string_view format, const std::tm& t) {
  static constexpr const char* kDays[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                          "Thursday", "Friday", "Saturday"};
  static constexpr const char* kMonths[] = {"January",   "February", "March",    "April",
                                            "May",       "June",     "July",     "August",
                                            "September", "October",  "November", "December"};
  int wday = ((t.tm_wday % 7) + 7) % 7, mon = ((t.tm_mon % 12) + 12) % 12;
  int hour12 = t.tm_hour % 12 == 0 ? 12 : t.tm_hour % 12;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    char c = format[++i];
    switch (c) {
      case 'a':
        out += std::string(kDays[wday]).substr(0, 3);
        break;
      case 'A':
        out += kDays[wday];
        break;
      case 'b':
      case 'h':
        out += std::string(kMonths[mon]).substr(0, 3);
        break;
      case 'B':
        out += kMonths[mon];
        break;
      case 'd':
        out += fmt::format("{:02d}", t.tm_mday);
        break;
      case 'e':
        out += fmt::format("{:2d}", t.tm_mday);
        break;
      case 'm':
        out += fmt::format("{:02d}", mon + 1);
        break;
      case 'y':
        out += fmt::format("{:02d}", (t.tm_year + 1900) % 100);
        break;
      case 'Y':
        out += std::to_string(t.tm_year + 1900);
        break;
      case 'H':
        out += fmt::format("{:02d}", t.tm_hour);
        break;
      case 'I':
        out += fmt::format("{:02d}", hour12);
        break;
      case 'M':
        out += fmt::format("{:02d}", t.tm_min);
        break;
      case 'S':
        out += fmt::format("{:02d}", t.tm_sec);
        break;
      case 'p':
        out += t.tm_hour < 12 ? "AM" : "PM";
        break;
      case 'j':
        out += fmt::format("{:03d}", t.tm_yday + 1);
        break;
      case 'w':
        out += std::to_string(wday);
        break;
      case 'u':
        out += std::to_string(wday == 0 ? 7 : wday);
        break;
      case 'D':
        out += strftime("%m/%d/%y", t);
        break;
      case 'F':
        out += strftime("%Y-%m-%d", t);
        break;
      case 'T':
        out += strftime("%H:%M:%S", t);
        break;
      case 'R':
        out += strftime("%H:%M", t);
        break;
      case 'c':
        out += strftime("%a %b %e %H:%M:%S %Y", t);
        break;
      case 'x':
        out += strftime("%m/%d/%y", t);
        break;
      case 'X':
        out += strftime("%H:%M:%S", t);
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += c;
    }
  }
  return out;
}

void add_globals(Scope& scope) {
  auto fn = [&](std::string name, Function::Impl impl) {
    scope.set(name, Value::object(std::make_shared<Function>(name, std::move(impl))));
  };
  fn("range", range);
  fn("dict", dict);
  fn("namespace", make_namespace);
  fn("raise_exception", raise_exception);
  fn("strftime_now", strftime_now);
  for (const char* name : {"lipsum", "cycler", "joiner"}) {
    fn(name, [name](Interpreter&, CallArgs&) { return unsupported_global(name); });
  }
}

}  // namespace chat
