// The tree-walking evaluator: scopes, statements, expressions, and the hooks filters call back.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/ast.h"
#include "chat/parser.h"
#include "chat/template.h"
#include "chat/value.h"

namespace chat {

struct Program {
  Body body;
};

// Variables of one frame. Jinja gives each for-loop iteration, macro call, set/filter block
// and with block its own frame; `if` does not. Lookups walk outwards to the render variables.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(std::string_view name) const;
  void set(std::string_view name, Value value);
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow : uint8_t { Normal, Break, Continue };

class Interpreter {
 public:
  explicit Interpreter(const EngineOptions& options);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  util::Result<std::string> render(const Body& body, const ScopePtr& globals);

  util::Result<Flow> exec(const Body& body, const ScopePtr& scope, std::string& out);
  util::Result<Value> eval(const Expr& e, const ScopePtr& scope);

  // Python/Jinja operations used by the evaluator, filters and methods. Their errors carry no
  // location; the evaluator adds the line and column of the expression that failed.
  util::Result<Value> call(const Value& callee, CallArgs& args);
  util::Result<Value> get_attr(const Value& obj, std::string_view name);
  util::Result<Value> get_item(const Value& obj, const Value& key);
  util::Result<Value> apply_filter(std::string_view name, const Value& value, CallArgs& args);
  util::Result<bool> apply_test(std::string_view name, const Value& value, CallArgs& args);

  // Macro bodies run here: a fresh frame under `closure`, output captured and returned.
  util::Result<Value> call_macro(const MacroDef& def, const ScopePtr& closure, CallArgs& args,
                                 std::optional<Value> caller);

  const EngineOptions& options() const { return options_; }
  util::Status check_size(size_t bytes) const;
  util::Status count_iteration();
  // raise_exception(): the message is reported as is, without a location.
  util::Error raise(std::string message);
  bool raised() const { return raised_; }
  // Reference cycles (a macro and the frame holding it, a namespace or list that contains
  // itself) would leak; what can take part in one is recorded and emptied after rendering.
  void remember_closure(const ScopePtr& scope) { closures_.push_back(scope); }
  void remember_container(const Value& v) { containers_.push_back(v); }

 private:
  util::Error fail(SourceLoc loc, util::Error error);
  util::Status enter(SourceLoc loc);
  void leave() { --depth_; }

  util::Result<Flow> exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out);
  util::Result<Flow> exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  util::Status run_loop(const Stmt& s, const ScopePtr& scope, const Value& iterable, int depth0,
                        std::string& out);
  util::Status assign(const Expr& target, Value value, const ScopePtr& scope);
  util::Result<std::string> render_block(const Body& body, const ScopePtr& scope);
  util::Result<Value> eval_filter(const Expr& e, const ScopePtr& scope, std::optional<Value> input);
  util::Result<Value> eval_call(const Expr& e, const ScopePtr& scope, std::optional<Value> caller);
  util::Status eval_args(const Expr& e, size_t first, const ScopePtr& scope, CallArgs& args);
  util::Result<Value> eval_compare(const Expr& e, const ScopePtr& scope);
  util::Result<Value> eval_item(const Expr& e, const ScopePtr& scope);

  EngineOptions options_;
  std::chrono::steady_clock::time_point deadline_;
  int depth_ = 0;
  int64_t iterations_ = 0;
  uint64_t enters_ = 0;  // the clock is read every 64 blocks, not on each
  bool failed_ = false;
  bool raised_ = false;  // the error is the template's own raise_exception() message  // the error being returned already says where it happened
  std::vector<ScopePtr> closures_;
  std::vector<Value> containers_;
};

// operators.cpp
util::Result<Value> binary_op(BinaryOp op, const Value& a, const Value& b, size_t max_bytes);
util::Result<bool> contains(const Value& container, const Value& item);
util::Result<Value> slice(const Value& obj, const Value& start, const Value& stop,
                          const Value& step);
std::string undefined_owner(const Value& obj);

// methods.cpp: Python methods of str, list and dict.
bool has_method(const Value& self, std::string_view name);
bool is_mutating_method(const Value& self, std::string_view name);
util::Result<Value> call_method(Interpreter& interp, const Value& self, std::string_view name,
                                CallArgs& args);

// format.cpp: str.format() and printf-style '%'.
util::Result<std::string> python_format(Interpreter& interp, std::string_view fmt,
                                        const CallArgs& args, bool escape_args);
util::Result<std::string> percent_format(std::string_view fmt, const Value& args, bool escape_args);

// json.cpp: json.dumps as Hugging Face's tojson calls it.
struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // per-level indent text; nullopt = one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
util::Result<std::string> to_json(const Value& v, const JsonOptions& options);

// filters.cpp: whether Jinja has a filter of this name (supported here or not).
bool is_filter_name(std::string_view name);

// builtins.cpp: globals (range, dict, namespace, raise_exception, strftime_now …).
void add_globals(Scope& scope);
std::string strftime(std::string_view format, const std::tm& t);

// Arguments bound to a Python signature: entries are nullopt when not passed.
using BoundArgs = std::vector<std::optional<Value>>;
util::Result<BoundArgs> bind_args(std::string_view what, const CallArgs& args,
                                  std::initializer_list<std::string_view> names,
                                  size_t required = 0);

}  // namespace chat
