// Tokenizer for the Jinja2 template syntax, with Jinja's whitespace control rules.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace chat {

struct SourceLoc {
  int line = 1;
  int column = 1;
};

enum class TokenType : uint8_t {
  Data,           // template text outside tags (already whitespace-controlled)
  VariableBegin,  // {{
  VariableEnd,    // }}
  BlockBegin,     // {%
  BlockEnd,       // %}
  Name,
  String,  // value holds the unescaped text
  Integer,
  Float,
  Operator,  // value holds the operator text: "+", "//", "==", "(" …
  Eof,
};

struct Token {
  TokenType type;
  std::string value;
  SourceLoc loc;
};

// Settings of the environment being emulated (Hugging Face uses trim + lstrip).
struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Splits `source` into tokens. Newlines are normalised to \n first, as Jinja does.
// Errors read "line L, column C: what is wrong".
util::Result<std::vector<Token>> tokenize(std::string_view source, const LexerOptions& options);

}  // namespace chat
