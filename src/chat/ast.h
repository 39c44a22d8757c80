// The parsed template: expression and statement nodes, mirroring Jinja2's node classes.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/lexer.h"
#include "chat/value.h"

namespace chat {

enum class ExprKind : uint8_t {
  Literal,  // literal
  Name,     // name
  NsRef,    // name.attr as an assignment target (`set ns.attr = …`)
  List,     // children: elements
  Tuple,    // children: elements
  Dict,     // children: key, value, key, value …
  Attr,     // children[0].name
  Item,     // children[0][children[1]]
  Slice,    // children: start, stop, step (each may be null); only inside Item
  Call,     // children[0](children[1..], kwargs)
  Filter,   // children[0] | name(children[1..], kwargs); children[0] null in filter blocks
  Test,     // children[0] is name(children[1..], kwargs)
  Neg,      // -children[0]
  Pos,      // +children[0]
  Not,      // not children[0]
  Binary,   // children[0] op children[1]
  Concat,   // children joined with ~
  Compare,  // children[0] compare_ops[i] children[i + 1] …
  And,
  Or,
  CondExpr,  // children[1] if children[0] else children[2] (children[2] may be null)
};

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CompareOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  SourceLoc loc;
  std::string name;  // Name/NsRef variable, Attr attribute, Filter/Test name
  std::string attr;  // NsRef attribute
  Value literal;
  BinaryOp op = BinaryOp::Add;
  std::vector<CompareOp> compare_ops;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args;    // f(*args)
  ExprPtr dyn_kwargs;  // f(**kwargs)
};

enum class StmtKind : uint8_t {
  Data,         // text
  Output,       // {{ exprs }} or {% print %}
  If,           // branches (if, elif…), else_body
  For,          // for target in value [if condition] [recursive]: body else else_body
  Set,          // set target = value
  SetBlock,     // set target [| value filters]: body endset
  Macro,        // macro definition
  CallBlock,    // call(macro params) value: body (the body becomes `caller`)
  FilterBlock,  // filter value: body
  With,         // with assignments: body
  Scope,        // generation: body in its own scope
  Break,
  Continue,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroDef {
  std::string name;
  SourceLoc loc;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  Body body;
  bool uses_caller = false;  // the body refers to `caller`, `varargs` or `kwargs`
  bool uses_varargs = false;
  bool uses_kwargs = false;
};

struct IfBranch {
  ExprPtr test;
  Body body;
};

struct Stmt {
  StmtKind kind;
  SourceLoc loc;
  std::string text;
  std::vector<ExprPtr> exprs;
  ExprPtr target;
  ExprPtr value;
  ExprPtr condition;
  bool recursive = false;
  std::vector<IfBranch> branches;
  std::vector<std::pair<ExprPtr, ExprPtr>> assignments;  // with
  Body body;
  Body else_body;
  std::shared_ptr<MacroDef> macro;
};

}  // namespace chat
