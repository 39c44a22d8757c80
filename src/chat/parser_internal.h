// Parser internals shared by parser.cpp (statements) and parse_expression.cpp (expressions).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"
#include "util/result.h"

namespace chat {

constexpr int kMaxNesting = 200;  // deeper templates are refused rather than overflow the stack

ExprPtr make_expr(ExprKind kind, SourceLoc loc);
std::string describe(const Token& t);

// The token stream and Jinja's expression grammar; the statement parser builds on it.
class ExpressionParser {
 public:
  explicit ExpressionParser(const std::vector<Token>& tokens) : t_(tokens) {}

 protected:
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

  util::Error fail_at(SourceLoc loc, std::string_view message) const {
    return util::errorf("line {}, column {}: {}", loc.line, loc.column, message);
  }

  // ---- expressions (parse_expression.cpp) -------------------------------------------------
  enum class TupleMode { Full, NoCondExpr, Simplified };
  bool is_tuple_end(std::initializer_list<std::string_view> end_names) const;
  util::Result<ExprPtr> parse_tuple(TupleMode mode,
                                    std::initializer_list<std::string_view> end_names,
                                    bool explicit_parens = false);
  util::Result<ExprPtr> parse_expression(bool with_condexpr);
  ExprPtr binary(ExprKind kind, SourceLoc loc, ExprPtr a, ExprPtr b);
  util::Result<ExprPtr> parse_or();
  util::Result<ExprPtr> parse_and();
  util::Result<ExprPtr> parse_not();
  util::Result<ExprPtr> parse_compare();
  util::Result<ExprPtr> parse_binary_level(int level);
  util::Result<ExprPtr> parse_math1();
  util::Result<ExprPtr> parse_concat();
  util::Result<ExprPtr> parse_unary(bool with_filter);
  util::Result<ExprPtr> parse_primary();
  util::Result<ExprPtr> parse_list();
  util::Result<ExprPtr> parse_dict();
  util::Result<ExprPtr> parse_postfix(ExprPtr node);
  util::Result<ExprPtr> parse_filter_expr(ExprPtr node);
  util::Result<ExprPtr> parse_subscript(ExprPtr node);
  util::Result<ExprPtr> parse_subscribed();
  util::Status parse_call_args(Expr& call);
  util::Result<ExprPtr> parse_call(ExprPtr node);
  // `| name(args) | name …`; with `inline_first` the first name has no leading pipe.
  util::Result<ExprPtr> parse_filter_chain(ExprPtr node, bool inline_first);
  util::Result<ExprPtr> parse_test(ExprPtr node);

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace chat
