// Parser from tokens to statements, following Jinja2's grammar and operator precedence.
#include "chat/parser.h"

#include <fmt/format.h>

#include <initializer_list>

#include "chat/parser_internal.h"

namespace chat {
namespace {

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

class Parser : public ExpressionParser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : ExpressionParser(tokens) {}

  util::Result<Body> parse_template() {
    HR_ASSIGN_OR_RETURN(Body body, subparse({}));
    if (cur().type != TokenType::Eof) return fail(cur(), "unexpected " + describe(cur()));
    return body;
  }

 private:
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

  int loop_depth_ = 0;
};

}  // namespace

util::Result<Body> parse(const std::vector<Token>& tokens) {
  Parser parser(tokens);
  return parser.parse_template();
}

}  // namespace chat
