// Jinja2's expression grammar: precedence from `or` down to literals, filters, tests, calls.
#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

#include "chat/parser_internal.h"

namespace chat {

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

bool ExpressionParser::is_tuple_end(std::initializer_list<std::string_view> end_names) const {
  TokenType t = cur().type;
  if (t == TokenType::VariableEnd || t == TokenType::BlockEnd || is_op(")")) return true;
  for (std::string_view n : end_names) {
    if (is_name(n)) return true;
  }
  return false;
}

util::Result<ExprPtr> ExpressionParser::parse_tuple(
    TupleMode mode, std::initializer_list<std::string_view> end_names, bool explicit_parens) {
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

util::Result<ExprPtr> ExpressionParser::parse_expression(bool with_condexpr) {
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

ExprPtr ExpressionParser::binary(ExprKind kind, SourceLoc loc, ExprPtr a, ExprPtr b) {
  auto e = make_expr(kind, loc);
  e->children.push_back(std::move(a));
  e->children.push_back(std::move(b));
  return e;
}

util::Result<ExprPtr> ExpressionParser::parse_or() {
  SourceLoc loc = cur().loc;
  HR_ASSIGN_OR_RETURN(auto left, parse_and());
  while (skip_name("or")) {
    HR_ASSIGN_OR_RETURN(auto right, parse_and());
    left = binary(ExprKind::Or, loc, std::move(left), std::move(right));
  }
  return left;
}

util::Result<ExprPtr> ExpressionParser::parse_and() {
  SourceLoc loc = cur().loc;
  HR_ASSIGN_OR_RETURN(auto left, parse_not());
  while (skip_name("and")) {
    HR_ASSIGN_OR_RETURN(auto right, parse_not());
    left = binary(ExprKind::And, loc, std::move(left), std::move(right));
  }
  return left;
}

util::Result<ExprPtr> ExpressionParser::parse_not() {
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

util::Result<ExprPtr> ExpressionParser::parse_compare() {
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

util::Result<ExprPtr> ExpressionParser::parse_binary_level(int level) {
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

util::Result<ExprPtr> ExpressionParser::parse_math1() {
  return parse_binary_level(1);
}

util::Result<ExprPtr> ExpressionParser::parse_concat() {
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

util::Result<ExprPtr> ExpressionParser::parse_unary(bool with_filter) {
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

util::Result<ExprPtr> ExpressionParser::parse_primary() {
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

util::Result<ExprPtr> ExpressionParser::parse_list() {
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

util::Result<ExprPtr> ExpressionParser::parse_dict() {
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

util::Result<ExprPtr> ExpressionParser::parse_postfix(ExprPtr node) {
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

util::Result<ExprPtr> ExpressionParser::parse_filter_expr(ExprPtr node) {
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

util::Result<ExprPtr> ExpressionParser::parse_subscript(ExprPtr node) {
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

util::Result<ExprPtr> ExpressionParser::parse_subscribed() {
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

util::Status ExpressionParser::parse_call_args(Expr& call) {
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

util::Result<ExprPtr> ExpressionParser::parse_call(ExprPtr node) {
  auto e = make_expr(ExprKind::Call, node->loc);
  e->children.push_back(std::move(node));
  HR_TRY(parse_call_args(*e));
  return e;
}

// `| name(args) | name …`; with `inline_first` the first name has no leading pipe.
util::Result<ExprPtr> ExpressionParser::parse_filter_chain(ExprPtr node, bool inline_first) {
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

util::Result<ExprPtr> ExpressionParser::parse_test(ExprPtr node) {
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

}  // namespace chat
