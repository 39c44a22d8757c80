// headroom tokenize: the token ids and pieces a model's tokenizer makes of a text.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "gguf/file.h"
#include "tokenizer/tokenizer.h"

namespace cli {

util::Result<tokenizer::Tokenizer> load_tokenizer(const std::string& path) {
  auto file = gguf::File::open(path);
  if (!file) return file.error();
  return tokenizer::Tokenizer::from_gguf(*file);
}

namespace {

// A piece quoted so that spaces, control bytes and partial UTF-8 stay visible: "\n", "\xE6".
std::string visible_piece(std::string_view piece) {
  std::string out = "\"";
  for (size_t i = 0; i < piece.size();) {
    const auto c = static_cast<unsigned char>(piece[i]);
    size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    bool whole = len > 0 && i + len <= piece.size();
    for (size_t k = 1; whole && k < len; ++k) {
      whole = (static_cast<unsigned char>(piece[i + k]) & 0xC0) == 0x80;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F || !whole) {
      out += fmt::format("\\x{:02X}", c);
      len = 1;
    } else {
      out.append(piece.substr(i, len));
    }
    i += len > 0 ? len : 1;
  }
  return out + "\"";
}

std::string_view type_label(tokenizer::TokenType type) {
  switch (type) {
    case tokenizer::TokenType::kControl:
      return "control";
    case tokenizer::TokenType::kUserDefined:
      return "user-defined";
    case tokenizer::TokenType::kUnknown:
      return "unknown";
    case tokenizer::TokenType::kUnused:
      return "unused";
    case tokenizer::TokenType::kByte:
      return "byte";
    default:
      return "";
  }
}

}  // namespace

void add_tokenize(CLI::App& app, int& exit_code) {
  struct Options {
    std::string model, prompt, file;
    bool no_bos = false, parse_special = false, json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "Show the token ids and pieces a model's tokenizer makes of a text");
  cmd->add_option("-m,--model", opts->model,
                  "GGUF file whose tokenizer to use (default: the shipped stories260K)");
  auto* prompt = cmd->add_option("-p,--prompt", opts->prompt, "Text to tokenize");
  auto* file =
      cmd->add_option("-f,--file", opts->file, "Read the text from this file (- for stdin)");
  prompt->excludes(file);
  cmd->add_flag("--no-bos", opts->no_bos,
                "Do not add the BOS (or [CLS] ... [SEP]) the file asks for");
  cmd->add_flag(
      "--parse-special", opts->parse_special,
      "Turn control-token text such as <start_of_turn> into those tokens (for rendered templates)");
  cmd->add_flag("--json", opts->json, "Print a JSON array of {id, piece, text}");
  cmd->callback([opts, prompt, file, &exit_code] {
    auto fail = [&](const std::string& message) {
      std::fprintf(stderr, "%s\n", message.c_str());
      exit_code = kExitBadInput;
    };
    std::string text = opts->prompt;
    if (file->count() > 0) {
      if (opts->file == "-") {
        text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      } else {
        std::ifstream in(opts->file, std::ios::binary);
        if (!in) return fail("tokenize: cannot read " + opts->file + " — check the path");
        text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
    } else if (prompt->count() == 0) {
      return fail("tokenize: no text — pass it with -p TEXT or -f FILE");
    }
    auto tok = load_tokenizer(opts->model.empty() ? default_model_path() : opts->model);
    if (!tok) return fail(tok.error().message());
    auto ids = tok->encode(text, {.add_bos = !opts->no_bos, .parse_special = opts->parse_special});
    if (opts->json) {
      auto out = nlohmann::json::array();
      for (int32_t id : ids) {
        out.push_back({{"id", id},
                       {"piece", tok->piece(id, /*render_special=*/true)},
                       {"text", std::string(tok->token_text(id))}});
      }
      // Pieces of byte tokens are not UTF-8 on their own; JSON shows them as U+FFFD ("text" keeps
      // the token's exact spelling).
      std::printf("%s\n",
                  out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      for (int32_t id : ids) {
        std::string line =
            fmt::format("{:>7}  {}", id, visible_piece(tok->piece(id, /*render_special=*/true)));
        std::string_view label = type_label(tok->token_type(id));
        if (!label.empty()) line += fmt::format("  ({})", label);
        std::printf("%s\n", line.c_str());
      }
    }
    exit_code = kExitOk;
  });
}

}  // namespace cli
