// The tree-walking evaluator: scopes, statements, expressions, and the hooks filters call back.
#include "chat/interpreter.h"

#include <fmt/format.h>

#include "chat/objects.h"

namespace chat {
namespace {

ScopePtr child_of(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

Value lookup(const ScopePtr& scope, const std::string& name) {
  for (const Scope* s = scope.get(); s; s = s->parent.get()) {
    if (const Value* v = s->find(name)) return *v;
  }
  return Value::undefined_name(name);
}

}  // namespace

const Value* Scope::find(std::string_view name) const {
  for (const auto& [k, v] : vars) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(value));
}

Interpreter::Interpreter(const EngineOptions& options) : options_(options) {}

Interpreter::~Interpreter() {
  // Macros hold the frame they were defined in, and that frame holds them: break the cycles.
  for (auto& scope : closures_) scope->vars.clear();
  for (auto& v : containers_) {
    if (v.is_list()) v.list().items.clear();
    if (v.is_dict()) v.dict().items.clear();
    if (v.is_object() && v.object()->is_namespace()) {
      static_cast<Namespace&>(*v.object()).attrs.items.clear();
    }
  }
}

util::Result<std::string> Interpreter::render(const Body& body, const ScopePtr& globals) {
  deadline_ = std::chrono::steady_clock::now() +
              std::chrono::milliseconds(options_.limits.max_milliseconds);
  std::string out;
  HR_TRY(exec(body, child_of(globals), out));
  return out;
}

util::Error Interpreter::fail(SourceLoc loc, util::Error error) {
  if (failed_) return error;
  failed_ = true;
  return util::errorf("line {}, column {}: {}", loc.line, loc.column, error.message());
}

util::Error Interpreter::raise(std::string message) {
  failed_ = true;
  raised_ = true;
  return util::Error(std::move(message));
}

util::Status Interpreter::enter(SourceLoc loc) {
  if (++depth_ > options_.limits.max_depth) {
    --depth_;
    return fail(loc, util::errorf("nesting or macro recursion deeper than {} levels",
                                  options_.limits.max_depth));
  }
  if ((++enters_ & 63) == 0 && std::chrono::steady_clock::now() > deadline_) {
    --depth_;
    return fail(loc,
                util::errorf("rendering took longer than {} ms", options_.limits.max_milliseconds));
  }
  return {};
}

util::Status Interpreter::check_size(size_t bytes) const {
  if (bytes > options_.limits.max_string_bytes) {
    return util::errorf("the text built is larger than the {} MiB limit",
                        options_.limits.max_string_bytes >> 20);
  }
  return {};
}

util::Status Interpreter::count_iteration() {
  if (++iterations_ > options_.limits.max_iterations) {
    return util::errorf("more than {} loop iterations", options_.limits.max_iterations);
  }
  if ((iterations_ & 1023) == 0 && std::chrono::steady_clock::now() > deadline_) {
    return util::errorf("rendering took longer than {} ms", options_.limits.max_milliseconds);
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Statements

util::Result<Flow> Interpreter::exec(const Body& body, const ScopePtr& scope, std::string& out) {
  if (body.empty()) return Flow::Normal;
  HR_TRY(enter(body.front()->loc));
  for (const auto& stmt : body) {
    auto flow = exec_stmt(*stmt, scope, out);
    if (!flow || *flow != Flow::Normal) {
      leave();
      return flow;
    }
  }
  leave();
  return Flow::Normal;
}

util::Result<std::string> Interpreter::render_block(const Body& body, const ScopePtr& scope) {
  std::string text;
  HR_TRY(exec(body, child_of(scope), text));
  return text;
}

util::Result<Flow> Interpreter::exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out) {
  switch (s.kind) {
    case StmtKind::Data:
      out += s.text;
      break;
    case StmtKind::Output:
      for (const auto& e : s.exprs) {
        HR_ASSIGN_OR_RETURN(Value v, eval(*e, scope));
        out += to_str(v);
      }
      break;
    case StmtKind::If:
      for (const auto& branch : s.branches) {
        HR_ASSIGN_OR_RETURN(Value test, eval(*branch.test, scope));
        if (truthy(test)) return exec(branch.body, scope, out);
      }
      return exec(s.else_body, scope, out);
    case StmtKind::For:
      return exec_for(s, scope, out);
    case StmtKind::Set: {
      HR_ASSIGN_OR_RETURN(Value v, eval(*s.value, scope));
      HR_TRY(assign(*s.target, std::move(v), scope));
      break;
    }
    case StmtKind::SetBlock: {
      HR_ASSIGN_OR_RETURN(std::string text, render_block(s.body, scope));
      Value v = Value::string(std::move(text));
      if (s.value) {
        HR_ASSIGN_OR_RETURN(v, eval_filter(*s.value, scope, v));
      }
      HR_TRY(assign(*s.target, std::move(v), scope));
      break;
    }
    case StmtKind::Macro:
      scope->set(s.macro->name, Value::object(std::make_shared<Macro>(s.macro.get(), scope)));
      remember_closure(scope);
      break;
    case StmtKind::CallBlock: {
      Value caller = Value::object(std::make_shared<Macro>(s.macro.get(), scope));
      HR_ASSIGN_OR_RETURN(Value v, eval_call(*s.value, scope, caller));
      out += to_str(v);
      break;
    }
    case StmtKind::FilterBlock: {
      HR_ASSIGN_OR_RETURN(std::string text, render_block(s.body, scope));
      HR_ASSIGN_OR_RETURN(Value v, eval_filter(*s.value, scope, Value::string(std::move(text))));
      out += to_str(v);
      break;
    }
    case StmtKind::With: {
      ScopePtr inner = child_of(scope);
      for (const auto& [target, value] : s.assignments) {
        HR_ASSIGN_OR_RETURN(Value v, eval(*value, scope));
        HR_TRY(assign(*target, std::move(v), inner));
      }
      return exec(s.body, inner, out);
    }
    case StmtKind::Scope:
      return exec(s.body, child_of(scope), out);
    case StmtKind::Break:
      return Flow::Break;
    case StmtKind::Continue:
      return Flow::Continue;
  }
  if (auto size = check_size(out.size()); !size) return fail(s.loc, std::move(size).error());
  return Flow::Normal;
}

util::Result<Flow> Interpreter::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  HR_ASSIGN_OR_RETURN(Value iterable, eval(*s.value, scope));
  HR_TRY(run_loop(s, scope, iterable, 0, out));
  return Flow::Normal;
}

util::Status Interpreter::run_loop(const Stmt& s, const ScopePtr& scope, const Value& iterable,
                                   int depth0, std::string& out) {
  auto listed = iterate(iterable);
  if (!listed) return fail(s.value->loc, std::move(listed).error());
  std::vector<Value> items = std::move(*listed);
  if (s.condition) {  // `for x in xs if cond`: filtered before the loop, so loop.* counts kept
                      // items
    std::vector<Value> kept;
    for (auto& item : items) {
      ScopePtr probe = child_of(scope);
      HR_TRY(assign(*s.target, item, probe));
      HR_ASSIGN_OR_RETURN(Value keep, eval(*s.condition, probe));
      if (truthy(keep)) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    HR_TRY(exec(s.else_body, child_of(scope), out));
    return {};
  }
  Loop::Recurse recurse;
  if (s.recursive) {
    remember_closure(scope);  // the loop object holds `scope` and may be stored in it
    recurse = [this, &s, scope](const Value& inner, int depth) -> util::Result<std::string> {
      std::string text;
      HR_TRY(run_loop(s, scope, inner, depth, text));
      return text;
    };
  }
  auto loop = std::make_shared<Loop>(std::move(items), depth0, std::move(recurse));
  const std::vector<Value>& looped = loop->items();
  Value loop_value = Value::object(loop);
  for (size_t i = 0; i < looped.size(); ++i) {
    if (auto counted = count_iteration(); !counted) return fail(s.loc, std::move(counted).error());
    loop->set_index(i);
    ScopePtr frame = child_of(scope);
    frame->vars.reserve(2);
    HR_TRY(assign(*s.target, looped[i], frame));
    frame->set("loop", loop_value);
    HR_ASSIGN_OR_RETURN(Flow flow, exec(s.body, frame, out));
    if (flow == Flow::Break) break;
  }
  return {};
}

util::Status Interpreter::assign(const Expr& target, Value value, const ScopePtr& scope) {
  if (target.kind == ExprKind::Name) {
    scope->set(target.name, std::move(value));
    return {};
  }
  if (target.kind == ExprKind::NsRef) {
    Value ns = lookup(scope, target.name);
    if (!ns.is_object() || !ns.object()->is_namespace()) {
      return fail(target.loc, util::errorf("cannot assign attribute '{}': '{}' is not a "
                                           "namespace() object",
                                           target.attr, target.name));
    }
    static_cast<Namespace&>(*ns.object()).attrs.set(Value::string(target.attr), std::move(value));
    return {};
  }
  auto items = iterate(value);
  if (!items) {
    return fail(target.loc, util::errorf("cannot unpack non-iterable {} object", type_name(value)));
  }
  size_t n = target.children.size();
  if (items->size() != n) {
    return fail(target.loc, items->size() < n
                                ? util::errorf("not enough values to unpack (expected {}, got {})",
                                               n, items->size())
                                : util::errorf("too many values to unpack (expected {})", n));
  }
  for (size_t i = 0; i < n; ++i) HR_TRY(assign(*target.children[i], (*items)[i], scope));
  return {};
}

util::Result<Value> Interpreter::call_macro(const MacroDef& def, const ScopePtr& closure,
                                            CallArgs& args, std::optional<Value> caller) {
  size_t n = def.params.size();
  if (args.positional.size() > n && !def.uses_varargs) {
    return util::errorf("macro '{}' takes not more than {} argument(s)", def.name, n);
  }
  ScopePtr frame = child_of(closure);
  std::vector<std::optional<Value>> bound(n);
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < n) {
      bound[i] = args.positional[i];
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  DictData extra;
  for (auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < n && def.params[i] != key) ++i;
    if (i < n) {
      if (bound[i]) return util::errorf("macro '{}' got multiple values for '{}'", def.name, key);
      bound[i] = value;
    } else if (key == "caller" && def.uses_caller) {
      caller = value;
    } else if (def.uses_kwargs) {
      extra.set(Value::string(key), value);
    } else {
      return util::errorf("macro '{}' takes no keyword argument '{}'", def.name, key);
    }
  }
  HR_TRY(enter(def.loc));
  size_t first_default = n - def.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    if (bound[i]) {
      frame->set(def.params[i], std::move(*bound[i]));
    } else if (i >= first_default) {
      auto v = eval(*def.defaults[i - first_default], frame);
      if (!v) {
        leave();
        return std::move(v).error();
      }
      frame->set(def.params[i], std::move(*v));
    } else {
      frame->set(def.params[i],
                 Value::undefined(UndefinedData{
                     .hint = fmt::format("parameter '{}' was not provided", def.params[i])}));
    }
  }
  if (def.uses_varargs) frame->set("varargs", Value::list(std::move(varargs), ListKind::Tuple));
  if (def.uses_kwargs) frame->set("kwargs", Value::dict(std::move(extra)));
  if (def.uses_caller) {
    frame->set("caller",
               caller ? *caller : Value::undefined(UndefinedData{.hint = "No caller defined"}));
  }
  std::string text;
  auto flow = exec(def.body, frame, text);
  leave();
  if (!flow) return std::move(flow).error();
  return Value::string(std::move(text));
}

// ---------------------------------------------------------------------------------------------
// Expressions

util::Status Interpreter::eval_args(const Expr& e, size_t first, const ScopePtr& scope,
                                    CallArgs& args) {
  for (size_t i = first; i < e.children.size(); ++i) {
    HR_ASSIGN_OR_RETURN(Value v, eval(*e.children[i], scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [key, expr] : e.kwargs) {
    HR_ASSIGN_OR_RETURN(Value v, eval(*expr, scope));
    args.keyword.emplace_back(key, std::move(v));
  }
  if (e.dyn_args) {
    HR_ASSIGN_OR_RETURN(Value v, eval(*e.dyn_args, scope));
    auto items = iterate(v);
    if (!items) return fail(e.dyn_args->loc, std::move(items).error());
    for (auto& item : *items) args.positional.push_back(std::move(item));
  }
  if (e.dyn_kwargs) {
    HR_ASSIGN_OR_RETURN(Value v, eval(*e.dyn_kwargs, scope));
    if (!v.is_dict()) {
      return fail(e.dyn_kwargs->loc,
                  util::errorf("argument after ** must be a mapping, not {}", type_name(v)));
    }
    for (const auto& [k, val] : v.dict().items) {
      if (!k.is_string()) return fail(e.dyn_kwargs->loc, util::Error("keywords must be strings"));
      args.keyword.emplace_back(k.str(), val);
    }
  }
  return {};
}

util::Result<Value> Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) return util::Error(callee.undefined_data().message());
  if (callee.is_object() && callee.object()->callable()) return callee.object()->call(*this, args);
  return util::errorf("'{}' object is not callable", type_name(callee));
}

util::Result<Value> Interpreter::eval_call(const Expr& e, const ScopePtr& scope,
                                           std::optional<Value> caller) {
  HR_ASSIGN_OR_RETURN(Value callee, eval(*e.children[0], scope));
  CallArgs args;
  HR_TRY(eval_args(e, 1, scope, args));
  if (caller) args.keyword.emplace_back("caller", std::move(*caller));
  auto result = call(callee, args);
  if (!result) return fail(e.loc, std::move(result).error());
  return result;
}

util::Result<Value> Interpreter::eval_filter(const Expr& e, const ScopePtr& scope,
                                             std::optional<Value> input) {
  Value v;
  const Expr* operand = e.children[0].get();
  if (!operand) {
    v = input ? *input : Value();
  } else if (input && operand->kind == ExprKind::Filter) {
    HR_ASSIGN_OR_RETURN(v, eval_filter(*operand, scope, input));
  } else {
    HR_ASSIGN_OR_RETURN(v, eval(*operand, scope));
  }
  CallArgs args;
  HR_TRY(eval_args(e, 1, scope, args));
  auto result = apply_filter(e.name, v, args);
  if (!result) return fail(e.loc, std::move(result).error());
  return result;
}

util::Result<Value> Interpreter::eval_item(const Expr& e, const ScopePtr& scope) {
  HR_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0], scope));
  const Expr& key = *e.children[1];
  util::Result<Value> result = Value();
  if (key.kind == ExprKind::Slice) {
    Value parts[3] = {Value::none(), Value::none(), Value::none()};
    for (int i = 0; i < 3; ++i) {
      if (key.children[i]) {
        HR_ASSIGN_OR_RETURN(parts[i], eval(*key.children[i], scope));
      }
    }
    result = slice(obj, parts[0], parts[1], parts[2]);
  } else {
    HR_ASSIGN_OR_RETURN(Value k, eval(key, scope));
    result = get_item(obj, k);
  }
  if (!result) return fail(e.loc, std::move(result).error());
  return result;
}

util::Result<Value> Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  HR_ASSIGN_OR_RETURN(Value left, eval(*e.children[0], scope));
  for (size_t i = 0; i < e.compare_ops.size(); ++i) {
    HR_ASSIGN_OR_RETURN(Value right, eval(*e.children[i + 1], scope));
    util::Result<bool> r = false;
    switch (e.compare_ops[i]) {
      case CompareOp::Eq:
        r = equals(left, right);
        break;
      case CompareOp::Ne:
        r = !equals(left, right);
        break;
      case CompareOp::Lt:
        r = less_than(left, right);
        break;
      case CompareOp::Gt:
        r = less_than(right, left);
        break;
      case CompareOp::Le:
        r = less_than(right, left);
        if (r) r = !*r;
        break;
      case CompareOp::Ge:
        r = less_than(left, right);
        if (r) r = !*r;
        break;
      case CompareOp::In:
        r = contains(right, left);
        break;
      case CompareOp::NotIn:
        r = contains(right, left);
        if (r) r = !*r;
        break;
    }
    if (!r) return fail(e.loc, std::move(r).error());
    if (!*r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

util::Result<Value> Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::Literal:
      return e.literal;
    case ExprKind::Name:
      return lookup(scope, e.name);
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      items.reserve(e.children.size());
      for (const auto& c : e.children) {
        HR_ASSIGN_OR_RETURN(Value v, eval(*c, scope));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items),
                         e.kind == ExprKind::List ? ListKind::List : ListKind::Tuple);
    }
    case ExprKind::Dict: {
      DictData d;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        HR_ASSIGN_OR_RETURN(Value k, eval(*e.children[i], scope));
        HR_ASSIGN_OR_RETURN(Value v, eval(*e.children[i + 1], scope));
        if (k.is_dict() || (k.is_list() && k.list_kind() != ListKind::Tuple)) {
          return fail(e.children[i]->loc, util::errorf("unhashable type: '{}'", type_name(k)));
        }
        d.set(std::move(k), std::move(v));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::Attr: {
      HR_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0], scope));
      auto r = get_attr(obj, e.name);
      if (!r) return fail(e.loc, std::move(r).error());
      return r;
    }
    case ExprKind::Item:
      return eval_item(e, scope);
    case ExprKind::Call:
      return eval_call(e, scope, std::nullopt);
    case ExprKind::Filter:
      return eval_filter(e, scope, std::nullopt);
    case ExprKind::Test: {
      HR_ASSIGN_OR_RETURN(Value v, eval(*e.children[0], scope));
      CallArgs args;
      HR_TRY(eval_args(e, 1, scope, args));
      auto r = apply_test(e.name, v, args);
      if (!r) return fail(e.loc, std::move(r).error());
      return Value::boolean(*r);
    }
    case ExprKind::Not: {
      HR_ASSIGN_OR_RETURN(Value v, eval(*e.children[0], scope));
      return Value::boolean(!truthy(v));
    }
    case ExprKind::Neg:
    case ExprKind::Pos: {
      HR_ASSIGN_OR_RETURN(Value v, eval(*e.children[0], scope));
      if (v.is_undefined()) return fail(e.loc, util::Error(v.undefined_data().message()));
      if (!v.is_number()) {
        return fail(e.loc, util::errorf("bad operand type for unary {}: '{}'",
                                        e.kind == ExprKind::Neg ? '-' : '+', type_name(v)));
      }
      if (e.kind == ExprKind::Pos) return v.is_bool() ? Value::integer(v.as_int()) : v;
      if (v.is_float()) return Value::number(-v.as_float());
      if (v.as_int() == INT64_MIN) return fail(e.loc, util::Error("integer overflow"));
      return Value::integer(-v.as_int());
    }
    case ExprKind::Binary: {
      HR_ASSIGN_OR_RETURN(Value a, eval(*e.children[0], scope));
      HR_ASSIGN_OR_RETURN(Value b, eval(*e.children[1], scope));
      auto r = binary_op(e.op, a, b, options_.limits.max_string_bytes);
      if (!r) return fail(e.loc, std::move(r).error());
      return r;
    }
    case ExprKind::Concat: {
      std::string text;
      for (const auto& c : e.children) {
        HR_ASSIGN_OR_RETURN(Value v, eval(*c, scope));
        text += to_str(v);
      }
      if (auto size = check_size(text.size()); !size) return fail(e.loc, std::move(size).error());
      return Value::string(std::move(text));
    }
    case ExprKind::Compare:
      return eval_compare(e, scope);
    case ExprKind::And:
    case ExprKind::Or: {
      HR_ASSIGN_OR_RETURN(Value a, eval(*e.children[0], scope));
      if (truthy(a) == (e.kind == ExprKind::Or)) return a;
      return eval(*e.children[1], scope);
    }
    case ExprKind::CondExpr: {
      HR_ASSIGN_OR_RETURN(Value test, eval(*e.children[0], scope));
      if (truthy(test)) return eval(*e.children[1], scope);
      if (e.children[2]) return eval(*e.children[2], scope);
      return Value::undefined(UndefinedData{
          .hint = fmt::format("the inline if-expression on line {} evaluated to false and no "
                              "else section was defined.",
                              e.loc.line)});
    }
    case ExprKind::Slice:
    case ExprKind::NsRef:
      break;
  }
  return fail(e.loc, util::Error("this expression is only valid as a subscript or a target"));
}

}  // namespace chat
