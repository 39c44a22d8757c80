// Runtime objects: namespace(), macros, the loop variable, bound methods, built-in functions.
#include "chat/objects.h"

#include <fmt/format.h>

namespace chat {

std::string Namespace::repr() const {
  ReprGuard guard(&attrs);
  if (guard.recursive()) return "<Namespace {...}>";
  std::string out = "<Namespace {";
  for (size_t i = 0; i < attrs.items.size(); ++i) {
    if (i) out += ", ";
    out += chat::repr(attrs.items[i].first) + ": " + chat::repr(attrs.items[i].second);
  }
  return out + "}>";
}

std::optional<Value> Namespace::attribute(std::string_view name) const {
  if (const Value* v = attrs.find(name)) return *v;
  return std::nullopt;
}

std::string Macro::repr() const {
  return fmt::format("<Macro '{}'>", def_->name);
}

std::optional<Value> Macro::attribute(std::string_view name) const {
  if (name == "name") return Value::string(def_->name);
  if (name == "arguments") {
    std::vector<Value> params;
    for (const auto& p : def_->params) params.push_back(Value::string(p));
    return Value::list(std::move(params), ListKind::Tuple);
  }
  if (name == "catch_kwargs") return Value::boolean(def_->uses_kwargs);
  if (name == "catch_varargs") return Value::boolean(def_->uses_varargs);
  if (name == "caller") return Value::boolean(def_->uses_caller);
  return std::nullopt;
}

util::Result<Value> Macro::call(Interpreter& interp, CallArgs& args) const {
  return interp.call_macro(*def_, closure_, args, std::nullopt);
}

std::string Loop::repr() const {
  return fmt::format("<LoopContext {}/{}>", index0_ + 1, items_.size());
}

std::optional<Value> Loop::attribute(std::string_view name) const {
  auto n = static_cast<int64_t>(items_.size());
  auto i = static_cast<int64_t>(index0_);
  if (name == "index0") return Value::integer(i);
  if (name == "index") return Value::integer(i + 1);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i + 1 == n);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(depth0_ + 1);
  if (name == "depth0") return Value::integer(depth0_);
  if (name == "previtem") {
    if (i == 0) return Value::undefined(UndefinedData{.hint = "there is no previous item"});
    return items_[index0_ - 1];
  }
  if (name == "nextitem") {
    if (i + 1 >= n) return Value::undefined(UndefinedData{.hint = "there is no next item"});
    return items_[index0_ + 1];
  }
  if (name == "cycle") {
    auto self = std::const_pointer_cast<Loop>(shared_from_this());
    return Value::object(std::make_shared<Function>(
        "cycle", [self](Interpreter&, CallArgs& args) -> util::Result<Value> {
          if (!args.keyword.empty()) return util::Error("loop.cycle() takes no keyword arguments");
          if (args.positional.empty()) return util::Error("no items for cycling given");
          return args.positional[self->index0_ % args.positional.size()];
        }));
  }
  if (name == "changed") {
    auto self = std::const_pointer_cast<Loop>(shared_from_this());
    return Value::object(std::make_shared<Function>(
        "changed", [self](Interpreter&, CallArgs& args) -> util::Result<Value> {
          const auto& values = args.positional;
          bool same = self->last_changed_ && self->last_changed_->size() == values.size();
          for (size_t k = 0; same && k < values.size(); ++k) {
            same = equals((*self->last_changed_)[k], values[k]);
          }
          if (same) return Value::boolean(false);
          self->last_changed_ = values;
          return Value::boolean(true);
        }));
  }
  return std::nullopt;
}

util::Result<Value> Loop::call(Interpreter&, CallArgs& args) const {
  if (!recurse_) {
    return util::Error("the loop must have the 'recursive' marker to be called recursively");
  }
  if (args.positional.size() != 1 || !args.keyword.empty()) {
    return util::Error("loop() takes exactly one argument, the items to loop over");
  }
  HR_ASSIGN_OR_RETURN(std::string text, recurse_(args.positional[0], depth0_ + 1));
  return Value::string(std::move(text));
}

std::string BoundMethod::repr() const {
  return fmt::format("<built-in method {} of {} object>", name_, chat::type_name(self_));
}

util::Result<Value> BoundMethod::call(Interpreter& interp, CallArgs& args) const {
  return call_method(interp, self_, name_, args);
}

util::Result<BoundArgs> bind_args(std::string_view what, const CallArgs& args,
                                  std::initializer_list<std::string_view> names, size_t required) {
  BoundArgs out(names.size());
  if (args.positional.size() > names.size()) {
    return util::errorf("{} takes at most {} argument(s) ({} given)", what, names.size(),
                        args.positional.size());
  }
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    for (std::string_view n : names) {
      if (n == key) break;
      ++i;
    }
    if (i == names.size()) {
      return util::errorf("{} got an unexpected keyword argument '{}'", what, key);
    }
    if (out[i]) return util::errorf("{} got multiple values for argument '{}'", what, key);
    out[i] = value;
  }
  size_t i = 0;
  for (std::string_view n : names) {
    if (i < required && !out[i]) {
      return util::errorf("{} is missing the required argument '{}'", what, n);
    }
    ++i;
  }
  return out;
}

}  // namespace chat
