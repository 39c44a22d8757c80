// synth's built-in vocabularies: SentencePiece-style for llama, Gemma 4's layout for gemma4.
#include "model/synth_vocab.h"

#include <fmt/format.h>

#include <iterator>
#include <set>
#include <vector>

namespace model {
namespace {

using gguf::MetaValue;

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // ▁

// GGUF token types (tokenizer.ggml.token_type).
enum TokenKind : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

struct FixedToken {
  int32_t id;
  const char* text;
  TokenKind kind;
};

// Spec §5.1. The converter marks the channel, tool-call, tool-response and string-delimiter
// tokens user-defined so they show when decoded (spec §5.2): tool and reasoning parsers read them.
constexpr FixedToken kGemma4Specials[] = {
    {0, "<pad>", kControl},
    {1, "<eos>", kControl},
    {2, "<bos>", kControl},
    {3, "<unk>", kUnknown},
    {4, "<mask>", kControl},
    {46, "<|tool>", kControl},
    {47, "<tool|>", kControl},
    {48, "<|tool_call>", kUserDefined},
    {49, "<tool_call|>", kUserDefined},
    {50, "<|tool_response>", kUserDefined},
    {51, "<tool_response|>", kUserDefined},
    {52, "<|\"|>", kUserDefined},
    {98, "<|think|>", kControl},
    {100, "<|channel>", kUserDefined},
    {101, "<channel|>", kUserDefined},
    {105, "<|turn>", kControl},
    {106, "<turn|>", kControl},
    {107, "\n", kNormal},
    {108, "\n\n", kNormal},
    {109, "\n\n\n", kNormal},
};
constexpr int32_t kGemma4FirstByteToken = 238;  // <0x00> … <0xFF> at 238–493 (spec §5.1)

// The image and audio markers (spec §5.1: begin / end of image and audio, the soft-token
// placeholders) at their real ids in a full-size vocabulary; a small one takes them at its top ids,
// in this order.
constexpr FixedToken kGemma4MediaMarkers[] = {
    {255999, "<|image>", kControl},  {258880, "<|image|>", kControl},
    {258882, "<image|>", kControl},  {256000, "<|audio>", kControl},
    {258881, "<|audio|>", kControl}, {258883, "<audio|>", kControl},
    {258884, "<|video|>", kControl},
};

// Words of the chat and tool syntax, merged from their characters so that a tool call takes
// fewer tokens than its bytes; each prefix of two or more characters becomes a token.
constexpr const char* kGemma4Words[] = {
    "call",
    "thought",
    "model",
    "user",
    "system",
    "type",
    "STRING",
    "OBJECT",
    "INTEGER",
    "NUMBER",
    "BOOLEAN",
    "ARRAY",
    "value",
    "name",
    "true",
    "false",
    "null",
    "required",
    "properties",
    "description",
    "declaration",
    "response",
    "\xE2\x96\x81"
    "the",
    "\xE2\x96\x81"
    "and",
};

}  // namespace

util::Status write_llama_vocab(gguf::Writer& w, int n_vocab) {
  if (n_vocab < 300)
    return util::errorf("synth: the built-in llama vocabulary needs at least 300 tokens");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {kUnknown, kControl, kControl};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    types.push_back(kByte);
  }
  const std::string space(kEscapedSpace);
  std::vector<std::string> pieces = {space};
  for (char c = 'a'; c <= 'z'; ++c) pieces.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) pieces.push_back(space + c);
  // Every piece distinct ("▁a" already came from the letters): tools index tokens by text and
  // reject a vocabulary with duplicates (llama.cpp asserts on it).
  for (const char* word : {"the", "and", "was", "to", "he", "she", "it", "in", "of", "day", "said",
                           "time", "once", "upon", "there", "little", "big", "play", "happy"}) {
    pieces.push_back(space + word);
  }
  for (const auto& piece : pieces) {
    if (static_cast<int>(tokens.size()) >= n_vocab) break;
    tokens.push_back(piece);
    types.push_back(kNormal);
  }
  while (static_cast<int>(tokens.size()) < n_vocab) {
    tokens.push_back(fmt::format("<unused{}>", tokens.size()));
    types.push_back(kUnused);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  for (size_t i = 0; i < scores.size(); ++i)
    scores[i] = types[i] == kNormal ? -static_cast<float>(i) : 0.0f;
  w.set("tokenizer.ggml.model", MetaValue::string("llama"));
  w.set("tokenizer.ggml.tokens", MetaValue::array_strings(std::move(tokens)));
  w.set("tokenizer.ggml.scores", MetaValue::array_f32(scores));
  w.set("tokenizer.ggml.token_type", MetaValue::array_i32(types));
  w.set("tokenizer.ggml.bos_token_id", MetaValue::u32(1));
  w.set("tokenizer.ggml.eos_token_id", MetaValue::u32(2));
  w.set("tokenizer.ggml.unknown_token_id", MetaValue::u32(0));
  w.set("tokenizer.ggml.add_bos_token", MetaValue::boolean(true));
  return {};
}

util::Status write_gemma4_vocab(gguf::Writer& w, int n_vocab, const std::string& chat_template) {
  if (n_vocab < kGemma4FirstByteToken + 256 + 18) {
    return util::errorf(
        "synth: the built-in gemma4 vocabulary needs at least 512 tokens, the shape has {}",
        n_vocab);
  }
  std::vector<std::string> tokens(n_vocab);
  std::vector<int32_t> types(n_vocab, 0);  // 0: not yet given
  for (const FixedToken& t : kGemma4Specials) {
    tokens[t.id] = t.text;
    types[t.id] = t.kind;
  }
  for (int b = 0; b < 256; ++b) {
    tokens[kGemma4FirstByteToken + b] = fmt::format("<0x{:02X}>", b);
    types[kGemma4FirstByteToken + b] = kByte;
  }
  const int n_markers = static_cast<int>(std::size(kGemma4MediaMarkers));
  for (int i = 0; i < n_markers; ++i) {
    const FixedToken& t = kGemma4MediaMarkers[i];
    const int32_t id = n_vocab > 258884 ? t.id : n_vocab - n_markers + i;
    tokens[id] = t.text;
    types[id] = t.kind;
  }
  int32_t next_free = 0;
  auto place = [&](std::string text, TokenKind kind) {
    while (next_free < n_vocab && types[next_free] != 0) ++next_free;
    if (next_free == n_vocab) return false;
    tokens[next_free] = std::move(text);
    types[next_free] = kind;
    return true;
  };
  // Single characters first: the space escape and printable ASCII (a space is written ▁).
  std::set<std::string> known(tokens.begin(), tokens.end());
  place(std::string(kEscapedSpace), kNormal);
  for (char c = '!'; c <= '~'; ++c) place(std::string(1, c), kNormal);
  // Then the words, each built by merges of its prefix with the next character.
  std::vector<std::string> merges;
  for (std::string_view word : kGemma4Words) {
    size_t first = word.starts_with(kEscapedSpace) ? kEscapedSpace.size() : 1;
    for (size_t end = first + 1; end <= word.size(); ++end) {
      std::string prefix(word.substr(0, end));
      if (known.count(prefix)) continue;
      if (!place(prefix, kNormal)) break;
      known.insert(prefix);
      merges.push_back(fmt::format("{} {}", word.substr(0, end - 1), word.substr(end - 1, 1)));
    }
  }
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (types[id] != 0) continue;
    tokens[id] = fmt::format("<unused{}>", id);
    types[id] = kUnused;
  }
  std::vector<float> scores(n_vocab, 0.0f);
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (types[id] == kControl) scores[id] = -1000.0f;  // as the converter reports (spec §5.2)
  }
  w.set("tokenizer.ggml.model", MetaValue::string("gemma4"));
  w.set("tokenizer.ggml.tokens", MetaValue::array_strings(std::move(tokens)));
  w.set("tokenizer.ggml.scores", MetaValue::array_f32(scores));
  w.set("tokenizer.ggml.token_type", MetaValue::array_i32(types));
  w.set("tokenizer.ggml.merges", MetaValue::array_strings(std::move(merges)));
  w.set("tokenizer.ggml.bos_token_id", MetaValue::u32(2));
  w.set("tokenizer.ggml.eos_token_id", MetaValue::u32(1));
  w.set("tokenizer.ggml.unknown_token_id", MetaValue::u32(3));
  w.set("tokenizer.ggml.padding_token_id", MetaValue::u32(0));
  w.set("tokenizer.ggml.add_bos_token", MetaValue::boolean(true));
  w.set("tokenizer.ggml.add_space_prefix", MetaValue::boolean(false));
  if (!chat_template.empty()) w.set("tokenizer.chat_template", MetaValue::string(chat_template));
  return {};
}

}  // namespace model
