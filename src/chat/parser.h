// Parser from tokens to statements, following Jinja2's grammar and operator precedence.
#pragma once

#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"
#include "util/result.h"

namespace chat {

// The hint appended to errors about constructs this renderer does not implement.
inline constexpr const char* kUnsupportedHint =
    "pass --chat-template FILE or a built-in name (gemma4, chatml, llama3)";

// Errors read "line L, column C: what is wrong".
util::Result<Body> parse(const std::vector<Token>& tokens);

}  // namespace chat
