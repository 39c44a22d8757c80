// Parser from tokens to statements, following Jinja2's grammar and operator precedence.
#include "chat/parser.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <initializer_list>

namespace chat {
namespace {

constexpr int kMaxNesting = 200;  // deeper templates are refused rather than overflow the stack

ExprPtr make_expr(ExprKind kind, SourceLoc loc) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->loc = loc;
  return e;
}

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::Data:
      return "template data";
    case TokenType::VariableBegin:
      return "'{{'";
    case TokenType::VariableEnd:
      return "'}}'";
    case TokenType::BlockBegin:
      return "'{%'";
    case TokenType::BlockEnd:
      return "'%}'";
    case TokenType::Eof:
      return "end of template";
    case TokenType::String:
      return "a string";
    default:
      return "'" + t.value + "'";
  }
}

// Marks macros whose body reads `caller`, `varargs` or `kwargs` (Jinja decides the same way).
void scan_names(const Expr* e, MacroDef& m);
void scan_names(const Body& body, MacroDef& m) {
  for (const auto& s : body) {
    for (const auto& e : s->exprs) scan_names(e.get(), m);
    scan_names(s->target.get(), m);
    scan_names(s->value.get(), m);
    scan_names(s->condition.get(), m);
    for (const auto& b : s->branches) {
      scan_names(b.test.get(), m);
      scan_names(b.body, m);
    }
    for (const auto& [t, v] : s->assignments) scan_names(v.get(), m);
    scan_names(s->body, m);
    scan_names(s->else_body, m);
    if (s->macro && s->kind == StmtKind::CallBlock) {
      for (const auto& d : s->macro->defaults) scan_names(d.get(), m);
    }
  }
}
void scan_names(const Expr* e, MacroDef& m) {
  if (!e) return;
  if (e->kind == ExprKind::Name) {
    m.uses_caller |= e->name == "caller";
    m.uses_varargs |= e->name == "varargs";
    m.uses_kwargs |= e->name == "kwargs";
  }
  for (const auto& c : e->children) scan_names(c.get(), m);
  for (const auto& [k, v] : e->kwargs) scan_names(v.get(), m);
  scan_names(e->dyn_args.get(), m);
  scan_names(e->dyn_kwargs.get(), m);
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  util::Result<Body> parse_template() {
    HR_ASSIGN_OR_RETURN(Body body, subparse({}));
    if (cur().type != TokenType::Eof) return fail(cur(), "unexpected " + describe(cur()));
    return body;
  }

 private:
  // ---- token stream ----------------------------------------------------------------------
  const Token& cur() const { return t_[pos_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(pos_ + n, t_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }
  bool is_op(std::string_view op) const {
    return cur().type == TokenType::Operator && cur().value == op;
  }
  bool is_name(std::string_view name) const {
    return cur().type == TokenType::Name && cur().value == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  util::Error fail(const Token& at, std::string_view message) const {
    return util::errorf("line {}, column {}: {}", at.loc.line, at.loc.column, message);
  }
  util::Status expect_op(std::string_view op) {
    if (skip_op(op)) return {};
    return fail(cur(), fmt::format("expected '{}', got {}", op, describe(cur())));
  }
  util::Status expect(TokenType type, std::string_view what) {
    if (cur().type == type) {
      advance();
      return {};
    }
    return fail(cur(), fmt::format("expected {}, got {}", what, describe(cur())));
  }
  util::Result<std::string> expect_name() {
    if (cur().type != TokenType::Name) {
      return fail(cur(), fmt::format("expected a name, got {}", describe(cur())));
    }
    std::string name = cur().value;
    advance();
    return name;
  }

  // Guards recursion on both expressions and nested blocks.
  struct DepthGuard {
    explicit DepthGuard(int& d) : depth(d) { ++depth; }
    ~DepthGuard() { --depth; }
    int& depth;
  };
  util::Status check_depth() const {
    if (depth_ > kMaxNesting) {
      return fail(cur(), fmt::format("template nested deeper than {} levels", kMaxNesting));
    }
    return {};
  }

  // ---- statements ------------------------------------------------------------------------
  // Parses until a block tag whose name is in `end_names`; stops with that name as current.
  util::Result<Body> subparse(std::initializer_list<std::string_view> end_names) {
    Body body;
    while (cur().type != TokenType::Eof) {
      const Token& tok = cur();
      if (tok.type == TokenType::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Data;
        s->loc = tok.loc;
        s->text = tok.value;
        body.push_back(std::move(s));
        advance();
      } else if (tok.type == TokenType::VariableBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->loc = tok.loc;
        advance();
        HR_ASSIGN_OR_RETURN(auto e, parse_tuple(TupleMode::Full, {}));
        s->exprs.push_back(std::move(e));
        HR_TRY(expect(TokenType::VariableEnd, "'}}'"));
        body.push_back(std::move(s));
      } else if (tok.type == TokenType::BlockBegin) {
        advance();
        for (std::string_view end : end_names) {
          if (is_name(end)) return body;
        }
        HR_ASSIGN_OR_RETURN(auto s, parse_statement());
        HR_TRY(expect(TokenType::BlockEnd, "'%}'"));
        if (s) body.push_back(std::move(s));
      } else {
        return fail(tok, "unexpected " + describe(tok));
      }
    }
    return body;
  }

  // Parses the body of `tag` up to one of `end_names`, failing at end of template.
  util::Result<Body> parse_block_body(const Token& tag,
                                      std::initializer_list<std::string_view> end_names) {
    skip_op(":");
    HR_TRY(expect(TokenType::BlockEnd, "'%}'"));
    DepthGuard guard(depth_);
    HR_TRY(check_depth());
    HR_ASSIGN_OR_RETURN(Body body, subparse(end_names));
    if (cur().type == TokenType::Eof) {
      std::string expected;
      for (std::string_view e : end_names) {
        expected += (expected.empty() ? "'" : " or '") + std::string(e) + "'";
      }
      return fail(tag, fmt::format("'{}' is never closed (expected {} before the end of the "
                                   "template)",
                                   tag.value, expected));
    }
    return body;
  }

  util::Result<StmtPtr> parse_statement() {
    const Token& tag = cur();
    if (tag.type != TokenType::Name) return fail(tag, "expected a tag name after '{%'");
    const std::string& name = tag.value;
    if (name == "if") return parse_if();
    if (name == "for") return parse_for();
    if (name == "set") return parse_set();
    if (name == "macro") return parse_macro();
    if (name == "call") return parse_call_block();
    if (name == "filter") return parse_filter_block();
    if (name == "with") return parse_with();
    if (name == "generation") return parse_scope("endgeneration");
    if (name == "print") return parse_print();
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return fail(tag, fmt::format("'{}' outside of a for loop", name));
      auto s = new_stmt(name == "break" ? StmtKind::Break : StmtKind::Continue, tag);
      advance();
      return s;
    }
    static constexpr std::string_view kJinjaOnly[] = {"block",  "extends", "include",
                                                      "import", "from",    "autoescape"};
    for (std::string_view known : kJinjaOnly) {
      if (name == known) {
        return fail(tag, fmt::format("unsupported tag '{}' — {}", name, kUnsupportedHint));
      }
    }
    if (name.rfind("end", 0) == 0 || name == "else" || name == "elif") {
      return fail(tag, fmt::format("unexpected '{}': no open block expects it here", name));
    }
    return fail(tag, fmt::format("unknown tag '{}' — {}", name, kUnsupportedHint));
  }

  StmtPtr new_stmt(StmtKind kind, const Token& tag) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->loc = tag.loc;
    return s;
  }

  util::Result<StmtPtr> parse_if() {
    const Token& tag = cur();
    auto s = new_stmt(StmtKind::If, tag);
    advance();
    while (true) {
      IfBranch branch;
      HR_ASSIGN_OR_RETURN(branch.test, parse_tuple(TupleMode::NoCondExpr, {}));
      HR_ASSIGN_OR_RETURN(branch.body, parse_block_body(tag, {"elif", "else", "endif"}));
      s->branches.push_back(std::move(branch));
      if (skip_name("elif")) continue;
      if (skip_name("else")) {
        HR_ASSIGN_OR_RETURN(s->else_body, parse_block_body(tag, {"endif"}));
      }
      advance();  // endif
      return s;
    }
  }

  util::Result<StmtPtr> parse_for() {
    const Token& tag = cur();
    auto s = new_stmt(StmtKind::For, tag);
    advance();
    HR_ASSIGN_OR_RETURN(s->target, parse_assign_target(false, {"in"}));
    if (!skip_name("in")) return fail(cur(), "expected 'in' in for loop");
    HR_ASSIGN_OR_RETURN(s->value, parse_tuple(TupleMode::NoCondExpr, {"recursive"}));
    if (skip_name("if")) {
      HR_ASSIGN_OR_RETURN(s->condition, parse_expression(true));
    }
    s->recursive = skip_name("recursive");
    ++loop_depth_;
    auto body = parse_block_body(tag, {"endfor", "else"});
    --loop_depth_;
    if (!body) return std::move(body).error();
    s->body = std::move(*body);
    if (skip_name("else")) {
      HR_ASSIGN_OR_RETURN(s->else_body, parse_block_body(tag, {"endfor"}));
    }
    advance();  // endfor
    return s;
  }

  util::Result<StmtPtr> parse_set() {
    const Token& tag = cur();
    advance();
    HR_ASSIGN_OR_RETURN(auto target, parse_assign_target(true, {}));
    if (skip_op("=")) {
      auto s = new_stmt(StmtKind::Set, tag);
      s->target = std::move(target);
      HR_ASSIGN_OR_RETURN(s->value, parse_tuple(TupleMode::Full, {}));
      return s;
    }
    auto s = new_stmt(StmtKind::SetBlock, tag);
    s->target = std::move(target);
    if (is_op("|")) {
      HR_ASSIGN_OR_RETURN(s->value, parse_filter_chain(nullptr, false));
    }
    int saved = loop_depth_;
    loop_depth_ = 0;
    auto body = parse_block_body(tag, {"endset"});
    loop_depth_ = saved;
    if (!body) return std::move(body).error();
    s->body = std::move(*body);
    advance();
    return s;
  }

  util::Status parse_signature(MacroDef& m) {
    HR_TRY(expect_op("("));
    while (!is_op(")")) {
      if (!m.params.empty()) HR_TRY(expect_op(","));
      if (is_op(")")) break;
      HR_ASSIGN_OR_RETURN(std::string param, expect_name());
      m.params.push_back(std::move(param));
      if (skip_op("=")) {
        HR_ASSIGN_OR_RETURN(auto d, parse_expression(true));
        m.defaults.push_back(std::move(d));
      } else if (!m.defaults.empty()) {
        return fail(cur(), "non-default argument follows default argument");
      }
    }
    return expect_op(")");
  }

  util::Result<Body> parse_macro_body(const Token& tag, std::string_view end) {
    int saved = loop_depth_;
    loop_depth_ = 0;
    auto body = parse_block_body(tag, {end});
    loop_depth_ = saved;
    if (body) advance();
    return body;
  }

  util::Result<StmtPtr> parse_macro() {
    const Token& tag = cur();
    auto s = new_stmt(StmtKind::Macro, tag);
    advance();
    s->macro = std::make_shared<MacroDef>();
    s->macro->loc = tag.loc;
    HR_ASSIGN_OR_RETURN(s->macro->name, expect_name());
    HR_TRY(parse_signature(*s->macro));
    HR_ASSIGN_OR_RETURN(s->macro->body, parse_macro_body(tag, "endmacro"));
    scan_names(s->macro->body, *s->macro);
    return s;
  }

  util::Result<StmtPtr> parse_call_block() {
    const Token& tag = cur();
    auto s = new_stmt(StmtKind::CallBlock, tag);
    advance();
    s->macro = std::make_shared<MacroDef>();
    s->macro->name = "caller";
    s->macro->loc = tag.loc;
    if (is_op("(")) HR_TRY(parse_signature(*s->macro));
    HR_ASSIGN_OR_RETURN(s->value, parse_expression(true));
    if (s->value->kind != ExprKind::Call) return fail(tag, "expected a call after 'call'");
    HR_ASSIGN_OR_RETURN(s->macro->body, parse_macro_body(tag, "endcall"));
    scan_names(s->macro->body, *s->macro);
    return s;
  }

  util::Result<StmtPtr> parse_filter_block() {
    const Token& tag = cur();
    auto s = new_stmt(StmtKind::FilterBlock, tag);
    advance();
    HR_ASSIGN_OR_RETURN(s->value, parse_filter_chain(nullptr, true));
    HR_ASSIGN_OR_RETURN(s->body, parse_block_body(tag, {"endfilter"}));
    advance();
    return s;
  }

  util::Result<StmtPtr> parse_with() {
    const Token& tag = cur();
    auto s = new_stmt(StmtKind::With, tag);
    advance();
    while (cur().type != TokenType::BlockEnd) {
      if (!s->assignments.empty()) HR_TRY(expect_op(","));
      HR_ASSIGN_OR_RETURN(auto target, parse_assign_target(false, {}));
      HR_TRY(expect_op("="));
      HR_ASSIGN_OR_RETURN(auto value, parse_expression(true));
      s->assignments.emplace_back(std::move(target), std::move(value));
    }
    HR_ASSIGN_OR_RETURN(s->body, parse_block_body(tag, {"endwith"}));
    advance();
    return s;
  }

  util::Result<StmtPtr> parse_scope(std::string_view end) {
    const Token& tag = cur();
    auto s = new_stmt(StmtKind::Scope, tag);
    advance();
    HR_ASSIGN_OR_RETURN(s->body, parse_block_body(tag, {end}));
    advance();
    return s;
  }

  util::Result<StmtPtr> parse_print() {
    const Token& tag = cur();
    auto s = new_stmt(StmtKind::Output, tag);
    advance();
    while (cur().type != TokenType::BlockEnd) {
      if (!s->exprs.empty()) HR_TRY(expect_op(","));
      HR_ASSIGN_OR_RETURN(auto e, parse_expression(true));
      s->exprs.push_back(std::move(e));
    }
    return s;
  }

  // Names, tuples of names, or `ns.attr` when `with_namespace` (set statements).
  util::Result<ExprPtr> parse_assign_target(bool with_namespace,
                                            std::initializer_list<std::string_view> end_names) {
    if (with_namespace && cur().type == TokenType::Name && peek().type == TokenType::Operator &&
        peek().value == ".") {
      auto e = make_expr(ExprKind::NsRef, cur().loc);
      e->name = cur().value;
      advance();
      advance();
      HR_ASSIGN_OR_RETURN(e->attr, expect_name());
      return e;
    }
    SourceLoc loc = cur().loc;
    HR_ASSIGN_OR_RETURN(auto target, parse_tuple(TupleMode::Simplified, end_names));
    auto assignable = [](const Expr& x) {
      if (x.kind == ExprKind::Name) return true;
      if (x.kind != ExprKind::Tuple) return false;
      for (const auto& c : x.children) {
        if (c->kind != ExprKind::Name) return false;
      }
      return true;
    };
    if (!assignable(*target)) return fail_at(loc, "can only assign to names or tuples of names");
    return target;
  }

  util::Error fail_at(SourceLoc loc, std::string_view message) const {
    return util::errorf("line {}, column {}: {}", loc.line, loc.column, message);
  }

  // ---- expressions -----------------------------------------------------------------------
  enum class TupleMode { Full, NoCondExpr, Simplified };

  bool is_tuple_end(std::initializer_list<std::string_view> end_names) const {
    TokenType t = cur().type;
    if (t == TokenType::VariableEnd || t == TokenType::BlockEnd || is_op(")")) return true;
    for (std::string_view n : end_names) {
      if (is_name(n)) return true;
    }
    return false;
  }

  util::Result<ExprPtr> parse_tuple(TupleMode mode,
                                    std::initializer_list<std::string_view> end_names,
                                    bool explicit_parens = false) {
    SourceLoc loc = cur().loc;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) HR_TRY(expect_op(","));
      if (is_tuple_end(end_names)) break;
      if (mode == TupleMode::Simplified) {
        HR_ASSIGN_OR_RETURN(auto e, parse_primary());
        items.push_back(std::move(e));
      } else {
        HR_ASSIGN_OR_RETURN(auto e, parse_expression(mode == TupleMode::Full));
        items.push_back(std::move(e));
      }
      if (!is_op(",")) break;
      is_tuple = true;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) {
        return fail(cur(), fmt::format("expected an expression, got {}", describe(cur())));
      }
    }
    auto e = make_expr(ExprKind::Tuple, loc);
    e->children = std::move(items);
    return e;
  }

  util::Result<ExprPtr> parse_expression(bool with_condexpr) {
    DepthGuard guard(depth_);
    HR_TRY(check_depth());
    if (!with_condexpr) return parse_or();
    SourceLoc loc = cur().loc;
    HR_ASSIGN_OR_RETURN(auto expr, parse_or());
    while (skip_name("if")) {
      auto c = make_expr(ExprKind::CondExpr, loc);
      HR_ASSIGN_OR_RETURN(auto test, parse_or());
      c->children.push_back(std::move(test));
      c->children.push_back(std::move(expr));
      if (skip_name("else")) {
        HR_ASSIGN_OR_RETURN(auto other, parse_expression(true));
        c->children.push_back(std::move(other));
      } else {
        c->children.push_back(nullptr);
      }
      expr = std::move(c);
      loc = cur().loc;
    }
    return expr;
  }

  ExprPtr binary(ExprKind kind, SourceLoc loc, ExprPtr a, ExprPtr b) {
    auto e = make_expr(kind, loc);
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return e;
  }

  util::Result<ExprPtr> parse_or() {
    SourceLoc loc = cur().loc;
    HR_ASSIGN_OR_RETURN(auto left, parse_and());
    while (skip_name("or")) {
      HR_ASSIGN_OR_RETURN(auto right, parse_and());
      left = binary(ExprKind::Or, loc, std::move(left), std::move(right));
    }
    return left;
  }

  util::Result<ExprPtr> parse_and() {
    SourceLoc loc = cur().loc;
    HR_ASSIGN_OR_RETURN(auto left, parse_not());
    while (skip_name("and")) {
      HR_ASSIGN_OR_RETURN(auto right, parse_not());
      left = binary(ExprKind::And, loc, std::move(left), std::move(right));
    }
    return left;
  }

  util::Result<ExprPtr> parse_not() {
    if (is_name("not")) {
      SourceLoc loc = cur().loc;
      advance();
      DepthGuard guard(depth_);
      HR_TRY(check_depth());
      HR_ASSIGN_OR_RETURN(auto operand, parse_not());
      auto e = make_expr(ExprKind::Not, loc);
      e->children.push_back(std::move(operand));
      return e;
    }
    return parse_compare();
  }

  util::Result<ExprPtr> parse_compare() {
    SourceLoc loc = cur().loc;
    HR_ASSIGN_OR_RETURN(auto expr, parse_math1());
    std::unique_ptr<Expr> cmp;
    while (true) {
      CompareOp op;
      if (is_op("=="))
        op = CompareOp::Eq;
      else if (is_op("!="))
        op = CompareOp::Ne;
      else if (is_op("<"))
        op = CompareOp::Lt;
      else if (is_op("<="))
        op = CompareOp::Le;
      else if (is_op(">"))
        op = CompareOp::Gt;
      else if (is_op(">="))
        op = CompareOp::Ge;
      else if (is_name("in"))
        op = CompareOp::In;
      else if (is_name("not") && peek().type == TokenType::Name && peek().value == "in") {
        op = CompareOp::NotIn;
        advance();
      } else {
        break;
      }
      advance();
      if (!cmp) {
        cmp = make_expr(ExprKind::Compare, loc);
        cmp->children.push_back(std::move(expr));
      }
      HR_ASSIGN_OR_RETURN(auto operand, parse_math1());
      cmp->compare_ops.push_back(op);
      cmp->children.push_back(std::move(operand));
    }
    if (cmp) return cmp;
    return expr;
  }

  util::Result<ExprPtr> parse_binary_level(int level) {
    // Jinja's precedence: + - (math1) < ~ (concat) < * / // % (math2) < ** (pow).
    SourceLoc loc = cur().loc;
    if (level == 1) {
      HR_ASSIGN_OR_RETURN(auto left, parse_concat());
      while (is_op("+") || is_op("-")) {
        BinaryOp op = is_op("+") ? BinaryOp::Add : BinaryOp::Sub;
        advance();
        HR_ASSIGN_OR_RETURN(auto right, parse_concat());
        left = binary(ExprKind::Binary, loc, std::move(left), std::move(right));
        left->op = op;
      }
      return left;
    }
    if (level == 2) {
      HR_ASSIGN_OR_RETURN(auto left, parse_binary_level(3));
      while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
        BinaryOp op = is_op("*")    ? BinaryOp::Mul
                      : is_op("/")  ? BinaryOp::Div
                      : is_op("//") ? BinaryOp::FloorDiv
                                    : BinaryOp::Mod;
        advance();
        HR_ASSIGN_OR_RETURN(auto right, parse_binary_level(3));
        left = binary(ExprKind::Binary, loc, std::move(left), std::move(right));
        left->op = op;
      }
      return left;
    }
    HR_ASSIGN_OR_RETURN(auto left, parse_unary(true));
    while (skip_op("**")) {
      HR_ASSIGN_OR_RETURN(auto right, parse_unary(true));
      left = binary(ExprKind::Binary, loc, std::move(left), std::move(right));
      left->op = BinaryOp::Pow;
    }
    return left;
  }
  util::Result<ExprPtr> parse_math1() { return parse_binary_level(1); }

  util::Result<ExprPtr> parse_concat() {
    SourceLoc loc = cur().loc;
    HR_ASSIGN_OR_RETURN(auto first, parse_binary_level(2));
    if (!is_op("~")) return first;
    auto e = make_expr(ExprKind::Concat, loc);
    e->children.push_back(std::move(first));
    while (skip_op("~")) {
      HR_ASSIGN_OR_RETURN(auto next, parse_binary_level(2));
      e->children.push_back(std::move(next));
    }
    return e;
  }

  util::Result<ExprPtr> parse_unary(bool with_filter) {
    DepthGuard guard(depth_);
    HR_TRY(check_depth());
    SourceLoc loc = cur().loc;
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      ExprKind kind = is_op("-") ? ExprKind::Neg : ExprKind::Pos;
      advance();
      HR_ASSIGN_OR_RETURN(auto operand, parse_unary(false));
      node = make_expr(kind, loc);
      node->children.push_back(std::move(operand));
    } else {
      HR_ASSIGN_OR_RETURN(node, parse_primary());
    }
    HR_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
    if (with_filter) {
      HR_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
    }
    return node;
  }

  util::Result<ExprPtr> parse_primary() {
    DepthGuard guard(depth_);
    HR_TRY(check_depth());
    const Token& tok = cur();
    switch (tok.type) {
      case TokenType::Name: {
        auto e = make_expr(ExprKind::Literal, tok.loc);
        if (tok.value == "true" || tok.value == "True") {
          e->literal = Value::boolean(true);
        } else if (tok.value == "false" || tok.value == "False") {
          e->literal = Value::boolean(false);
        } else if (tok.value == "none" || tok.value == "None") {
          e->literal = Value::none();
        } else {
          e->kind = ExprKind::Name;
          e->name = tok.value;
        }
        advance();
        return e;
      }
      case TokenType::String: {
        auto e = make_expr(ExprKind::Literal, tok.loc);
        std::string text;
        while (cur().type == TokenType::String) {  // adjacent literals concatenate
          text += cur().value;
          advance();
        }
        e->literal = Value::string(std::move(text));
        return e;
      }
      case TokenType::Integer: {
        auto e = make_expr(ExprKind::Literal, tok.loc);
        int64_t v = 0;
        auto [p, ec] = std::from_chars(tok.value.data(), tok.value.data() + tok.value.size(), v);
        if (ec != std::errc()) return fail(tok, "integer literal too large");
        e->literal = Value::integer(v);
        advance();
        return e;
      }
      case TokenType::Float: {
        auto e = make_expr(ExprKind::Literal, tok.loc);
        e->literal = Value::number(std::strtod(tok.value.c_str(), nullptr));
        advance();
        return e;
      }
      case TokenType::Operator:
        if (tok.value == "(") {
          advance();
          HR_ASSIGN_OR_RETURN(auto e, parse_tuple(TupleMode::Full, {}, true));
          HR_TRY(expect_op(")"));
          return e;
        }
        if (tok.value == "[") return parse_list();
        if (tok.value == "{") return parse_dict();
        break;
      default:
        break;
    }
    return fail(tok, "unexpected " + describe(tok));
  }

  util::Result<ExprPtr> parse_list() {
    auto e = make_expr(ExprKind::List, cur().loc);
    advance();
    while (!is_op("]")) {
      if (!e->children.empty()) HR_TRY(expect_op(","));
      if (is_op("]")) break;
      HR_ASSIGN_OR_RETURN(auto item, parse_expression(true));
      e->children.push_back(std::move(item));
    }
    HR_TRY(expect_op("]"));
    return e;
  }

  util::Result<ExprPtr> parse_dict() {
    auto e = make_expr(ExprKind::Dict, cur().loc);
    advance();
    while (!is_op("}")) {
      if (!e->children.empty()) HR_TRY(expect_op(","));
      if (is_op("}")) break;
      HR_ASSIGN_OR_RETURN(auto key, parse_expression(true));
      HR_TRY(expect_op(":"));
      HR_ASSIGN_OR_RETURN(auto value, parse_expression(true));
      e->children.push_back(std::move(key));
      e->children.push_back(std::move(value));
    }
    HR_TRY(expect_op("}"));
    return e;
  }

  util::Result<ExprPtr> parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        HR_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
      } else if (is_op("(")) {
        HR_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  util::Result<ExprPtr> parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        HR_ASSIGN_OR_RETURN(node, parse_filter_chain(std::move(node), false));
      } else if (is_name("is")) {
        HR_ASSIGN_OR_RETURN(node, parse_test(std::move(node)));
      } else if (is_op("(")) {
        HR_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  util::Result<ExprPtr> parse_subscript(ExprPtr node) {
    const Token& tok = cur();
    advance();
    if (tok.value == ".") {
      const Token& attr = cur();
      if (attr.type == TokenType::Name) {
        auto e = make_expr(ExprKind::Attr, node->loc);
        e->name = attr.value;
        e->children.push_back(std::move(node));
        advance();
        return e;
      }
      if (attr.type != TokenType::Integer) return fail(attr, "expected a name or number after '.'");
      HR_ASSIGN_OR_RETURN(auto key, parse_primary());
      auto e = make_expr(ExprKind::Item, node->loc);
      e->children.push_back(std::move(node));
      e->children.push_back(std::move(key));
      return e;
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) HR_TRY(expect_op(","));
      HR_ASSIGN_OR_RETURN(auto arg, parse_subscribed());
      args.push_back(std::move(arg));
    }
    HR_TRY(expect_op("]"));
    auto e = make_expr(ExprKind::Item, node->loc);
    e->children.push_back(std::move(node));
    if (args.size() == 1) {
      e->children.push_back(std::move(args[0]));
    } else {
      auto t = make_expr(ExprKind::Tuple, tok.loc);
      t->children = std::move(args);
      e->children.push_back(std::move(t));
    }
    return e;
  }

  util::Result<ExprPtr> parse_subscribed() {
    SourceLoc loc = cur().loc;
    std::vector<ExprPtr> parts;
    if (is_op(":")) {
      advance();
      parts.push_back(nullptr);
    } else {
      HR_ASSIGN_OR_RETURN(auto node, parse_expression(true));
      if (!is_op(":")) return node;
      advance();
      parts.push_back(std::move(node));
    }
    if (is_op(":") || is_op("]") || is_op(",")) {
      parts.push_back(nullptr);
    } else {
      HR_ASSIGN_OR_RETURN(auto stop, parse_expression(true));
      parts.push_back(std::move(stop));
    }
    if (skip_op(":") && !is_op("]") && !is_op(",")) {
      HR_ASSIGN_OR_RETURN(auto step, parse_expression(true));
      parts.push_back(std::move(step));
    } else {
      parts.push_back(nullptr);
    }
    auto e = make_expr(ExprKind::Slice, loc);
    e->children = std::move(parts);
    return e;
  }

  util::Status parse_call_args(Expr& call) {
    const Token& open = cur();
    HR_TRY(expect_op("("));
    bool need_comma = false;
    auto invalid = [&] { return fail(open, "invalid syntax for function call expression"); };
    while (!is_op(")")) {
      if (need_comma) {
        HR_TRY(expect_op(","));
        if (is_op(")")) break;
      }
      if (skip_op("*")) {
        if (call.dyn_args || call.dyn_kwargs) return invalid();
        HR_ASSIGN_OR_RETURN(call.dyn_args, parse_expression(true));
      } else if (skip_op("**")) {
        if (call.dyn_kwargs) return invalid();
        HR_ASSIGN_OR_RETURN(call.dyn_kwargs, parse_expression(true));
      } else if (cur().type == TokenType::Name && peek().type == TokenType::Operator &&
                 peek().value == "=") {
        if (call.dyn_kwargs) return invalid();
        std::string key = cur().value;
        advance();
        advance();
        HR_ASSIGN_OR_RETURN(auto value, parse_expression(true));
        call.kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (call.dyn_args || call.dyn_kwargs || !call.kwargs.empty()) return invalid();
        HR_ASSIGN_OR_RETURN(auto arg, parse_expression(true));
        call.children.push_back(std::move(arg));
      }
      need_comma = true;
    }
    return expect_op(")");
  }

  util::Result<ExprPtr> parse_call(ExprPtr node) {
    auto e = make_expr(ExprKind::Call, node->loc);
    e->children.push_back(std::move(node));
    HR_TRY(parse_call_args(*e));
    return e;
  }

  // `| name(args) | name …`; with `inline_first` the first name has no leading pipe.
  util::Result<ExprPtr> parse_filter_chain(ExprPtr node, bool inline_first) {
    while (is_op("|") || inline_first) {
      if (!inline_first) advance();
      inline_first = false;
      auto e = make_expr(ExprKind::Filter, cur().loc);
      HR_ASSIGN_OR_RETURN(e->name, expect_name());
      while (skip_op(".")) {
        HR_ASSIGN_OR_RETURN(std::string part, expect_name());
        e->name += "." + part;
      }
      e->children.push_back(std::move(node));
      if (is_op("(")) HR_TRY(parse_call_args(*e));
      node = std::move(e);
    }
    return node;
  }

  util::Result<ExprPtr> parse_test(ExprPtr node) {
    SourceLoc loc = cur().loc;
    advance();  // is
    bool negated = skip_name("not");
    auto e = make_expr(ExprKind::Test, cur().loc);
    HR_ASSIGN_OR_RETURN(e->name, expect_name());
    while (skip_op(".")) {
      HR_ASSIGN_OR_RETURN(std::string part, expect_name());
      e->name += "." + part;
    }
    e->children.push_back(std::move(node));
    if (is_op("(")) {
      HR_TRY(parse_call_args(*e));
    } else {
      TokenType t = cur().type;
      bool starts_arg = t == TokenType::Name || t == TokenType::String || t == TokenType::Integer ||
                        t == TokenType::Float || is_op("[") || is_op("{");
      if (starts_arg && !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) return fail(cur(), "tests cannot be chained with 'is'");
        HR_ASSIGN_OR_RETURN(auto arg, parse_primary());
        HR_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
        e->children.push_back(std::move(arg));
      }
    }
    if (!negated) return e;
    auto n = make_expr(ExprKind::Not, loc);
    n->children.push_back(std::move(e));
    return n;
  }

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

util::Result<Body> parse(const std::vector<Token>& tokens) {
  Parser parser(tokens);
  return parser.parse_template();
}

}  // namespace chat
