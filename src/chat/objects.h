// Runtime objects: namespace(), macros, the loop variable, bound methods, built-in functions.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/interpreter.h"
#include "chat/value.h"

namespace chat {

// namespace(...): the one object whose attributes `set ns.attr = …` may change.
class Namespace : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  std::optional<Value> attribute(std::string_view name) const override;
  bool is_namespace() const override { return true; }
  DictData attrs;
};

// A macro (or the body of a call block, passed as `caller`) closed over its defining frame.
class Macro : public Object {
 public:
  Macro(const MacroDef* def, ScopePtr closure) : def_(def), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override;
  std::optional<Value> attribute(std::string_view name) const override;
  bool callable() const override { return true; }
  util::Result<Value> call(Interpreter& interp, CallArgs& args) const override;

 private:
  const MacroDef* def_;
  ScopePtr closure_;
};

// `loop` inside a for block (Jinja's LoopContext).
class Loop : public Object, public std::enable_shared_from_this<Loop> {
 public:
  using Recurse = std::function<util::Result<std::string>(const Value& iterable, int depth0)>;
  Loop(std::vector<Value> items, int depth0, Recurse recurse)
      : items_(std::move(items)), depth0_(depth0), recurse_(std::move(recurse)) {}
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override;
  std::optional<Value> attribute(std::string_view name) const override;
  bool callable() const override { return true; }
  util::Result<Value> call(Interpreter& interp, CallArgs& args) const override;

  const std::vector<Value>& items() const { return items_; }
  void set_index(size_t index0) { index0_ = index0; }

 private:
  std::vector<Value> items_;
  size_t index0_ = 0;
  int depth0_;
  Recurse recurse_;
  mutable std::optional<std::vector<Value>> last_changed_;
};

// A method looked up on a str, list or dict, e.g. `text.split` before it is called.
class BoundMethod : public Object {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override;
  bool callable() const override { return true; }
  util::Result<Value> call(Interpreter& interp, CallArgs& args) const override;

 private:
  Value self_;
  std::string name_;
};

class Function : public Object {
 public:
  using Impl = std::function<util::Result<Value>(Interpreter&, CallArgs&)>;
  Function(std::string name, Impl impl) : name_(std::move(name)), impl_(std::move(impl)) {}
  std::string type_name() const override { return "function"; }
  std::string repr() const override { return "<function " + name_ + ">"; }
  bool callable() const override { return true; }
  util::Result<Value> call(Interpreter& interp, CallArgs& args) const override {
    return impl_(interp, args);
  }

 private:
  std::string name_;
  Impl impl_;
};

}  // namespace chat
