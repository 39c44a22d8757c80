// Tokenizer: building from GGUF metadata, encoding around special tokens, decoding, end of turn.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <optional>

#include "tokenizer/encoders.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/unicode.h"

namespace tokenizer {
namespace {

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // ▁ U+2581
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";   // U+FFFD

struct NamedModel {
  std::string_view name;
  ModelKind kind;
};
constexpr NamedModel kModels[] = {
    {"llama", ModelKind::kSpm},
    {"gpt2", ModelKind::kBpe},
    {"gemma4", ModelKind::kGemma4},
    {"bert", ModelKind::kWpm},
};

// Control tokens that end a turn in common chat formats. llama.cpp recognises end of turn by
// these texts too; Gemma 4 files differ in which id they store as EOS (spec §8.2).
constexpr std::string_view kEndOfTurnTexts[] = {
    "<turn|>", "<eos>", "<end_of_turn>", "<|eot_id|>",      "<|eom_id|>",         "<|im_end|>",
    "<|end|>", "<EOT>", "<|endoftext|>", "<|end_of_text|>", "<end_of_utterance>",
};

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos).append(to);
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

std::string escape_spaces(std::string_view text) {
  std::string out(text);
  replace_all(out, " ", kEscapedSpace);
  return out;
}

}  // namespace

struct Tokenizer::Impl {
  Vocab vocab;
  std::string model_name;
  PreTokenizer pre = PreTokenizer::kDefault;
  std::optional<SpmEncoder> spm;
  std::optional<BpeEncoder> bpe;
  std::optional<WpmEncoder> wpm;
  std::optional<SpecialTokens> specials;
  std::vector<int32_t> end_of_generation;
  // SentencePiece with a dummy prefix and WordPiece put a space before the first word.
  bool strip_leading_space = false;

  // Every token's piece as decode shows it without render_special, built once at load so that
  // decoding is a copy per token.
  std::string piece_data;
  std::vector<uint32_t> piece_offsets;

  void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const;
  // Computes a token's piece from its text and type.
  void append_piece(int32_t id, bool render_special, std::string& out) const;
  // The same from the precomputed pieces where they apply.
  void append_cached_piece(int32_t id, bool render_special, std::string& out) const {
    const bool differs_when_rendered =
        render_special && vocab.valid(id) &&
        (vocab.type(id) == TokenType::kControl || vocab.type(id) == TokenType::kUnused ||
         vocab.type(id) == TokenType::kUnknown || id == vocab.unk);
    if (!vocab.valid(id) || differs_when_rendered) return append_piece(id, render_special, out);
    out.append(piece_data, piece_offsets[id], piece_offsets[id + 1] - piece_offsets[id]);
  }
};

util::Result<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  HR_ASSIGN_OR_RETURN(std::optional<std::string_view> model,
                      file.get_string("tokenizer.ggml.model"));
  if (!model) {
    return util::errorf("{}: tokenizer.ggml.model is missing; the file carries no tokenizer",
                        file.name());
  }
  const NamedModel* named = nullptr;
  for (const NamedModel& m : kModels) {
    if (m.name == *model) named = &m;
  }
  if (!named) {
    return util::errorf(
        "{}: unsupported tokenizer model '{}' in tokenizer.ggml.model (supported: "
        "llama, gpt2, gemma4, bert)",
        file.name(), *model);
  }

  auto impl = std::make_shared<Impl>();
  impl->model_name = std::string(*model);
  HR_ASSIGN_OR_RETURN(impl->vocab, load_vocab(file, named->kind));
  const Vocab& vocab = impl->vocab;
  switch (named->kind) {
    case ModelKind::kSpm:
      impl->spm.emplace(vocab);
      impl->strip_leading_space = vocab.add_space_prefix;
      break;
    case ModelKind::kBpe: {
      // Only byte-level BPE has word-splitting rules; the other kinds ignore tokenizer.ggml.pre.
      HR_ASSIGN_OR_RETURN(std::optional<std::string_view> pre,
                          file.get_string("tokenizer.ggml.pre"));
      auto kind = pre_tokenizer_from_name(pre.value_or("default"));
      if (!kind) return kind.error().with_context(file.name());
      impl->pre = *kind;
      HR_ASSIGN_OR_RETURN(BpeEncoder bpe, BpeEncoder::build(file, vocab, /*byte_level=*/true));
      impl->bpe.emplace(std::move(bpe));
      break;
    }
    case ModelKind::kGemma4: {
      HR_ASSIGN_OR_RETURN(BpeEncoder bpe, BpeEncoder::build(file, vocab, /*byte_level=*/false));
      impl->bpe.emplace(std::move(bpe));
      break;
    }
    case ModelKind::kWpm:
      impl->wpm.emplace(vocab);
      impl->strip_leading_space = true;
      break;
  }
  impl->specials.emplace(vocab);
  impl->piece_offsets.reserve(vocab.size() + 1);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    impl->piece_offsets.push_back(static_cast<uint32_t>(impl->piece_data.size()));
    impl->append_piece(id, /*render_special=*/false, impl->piece_data);
  }
  impl->piece_offsets.push_back(static_cast<uint32_t>(impl->piece_data.size()));

  std::vector<int32_t>& eog = impl->end_of_generation;
  if (vocab.eos != kNoToken) eog.push_back(vocab.eos);
  if (vocab.eot != kNoToken) eog.push_back(vocab.eot);
  for (std::string_view text : kEndOfTurnTexts) {
    int32_t id = vocab.find(text);
    if (id != kNoToken && vocab.type(id) == TokenType::kControl) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  return Tokenizer(std::move(impl));
}

void Tokenizer::Impl::encode_text(std::string_view text, bool after_special,
                                  std::vector<int32_t>& out) const {
  switch (vocab.kind) {
    case ModelKind::kSpm: {
      // llama.cpp (like SentencePiece) puts the dummy space before text that starts the input
      // or follows a special token.
      std::string s = vocab.add_space_prefix && after_special ? " " : "";
      s.append(text);
      replace_all(s, " ", kEscapedSpace);
      spm->encode(s, out);
      return;
    }
    case ModelKind::kBpe: {
      std::vector<ByteSpan> words;
      split_words(pre, text, words);
      BpeEncoder::Scratch scratch;
      for (ByteSpan w : words) {
        bpe->encode_word(text.substr(w.begin, w.end - w.begin), out, scratch);
      }
      return;
    }
    case ModelKind::kGemma4: {
      // Spec §5.3: spaces become ▁, then runs of newlines and runs of anything else are encoded
      // apart; a run of newlines that is itself a token stays whole.
      const std::string s = escape_spaces(text);
      BpeEncoder::Scratch scratch;
      for (size_t pos = 0; pos < s.size();) {
        const bool newlines = s[pos] == '\n';
        size_t end = pos;
        while (end < s.size() && (s[end] == '\n') == newlines) ++end;
        std::string_view run = std::string_view(s).substr(pos, end - pos);
        int32_t whole = newlines ? vocab.find(run) : kNoToken;
        if (whole != kNoToken && (vocab.type(whole) == TokenType::kNormal ||
                                  vocab.type(whole) == TokenType::kUserDefined)) {
          out.push_back(whole);
        } else {
          bpe->encode_word(run, out, scratch);
        }
        pos = end;
      }
      return;
    }
    case ModelKind::kWpm:
      wpm->encode(text, out);
      return;
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, EncodeOptions opts) const {
  const Impl& m = *impl_;
  const Vocab& v = m.vocab;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  const std::vector<Fragment> fragments = m.specials->partition(text, opts.parse_special);
  const bool add_special = opts.add_bos && v.add_bos && v.bos != kNoToken;
  const bool starts_with_bos =
      !fragments.empty() && fragments.front().token != kNoToken && fragments.front().token == v.bos;
  if (add_special && !starts_with_bos) out.push_back(v.bos);
  bool after_special = true;
  for (const Fragment& f : fragments) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      after_special = true;
    } else {
      m.encode_text(text.substr(f.begin, f.end - f.begin), after_special, out);
      after_special = false;
    }
  }
  if (opts.add_bos && v.add_eos && v.eos != kNoToken) out.push_back(v.eos);
  return out;
}

void Tokenizer::Impl::append_piece(int32_t id, bool render_special, std::string& out) const {
  if (!vocab.valid(id)) {
    out.append(kReplacement);
    return;
  }
  const std::string_view text = vocab.text(id);
  const TokenType type = vocab.type(id);
  if (id == vocab.unk || type == TokenType::kUnknown) {
    // WordPiece's unknown token replaces a whole word, so it starts one like "▁word" pieces do.
    if (vocab.kind == ModelKind::kWpm) out.push_back(' ');
    out.append(render_special ? text : kReplacement);
    return;
  }
  switch (type) {
    case TokenType::kControl:
    case TokenType::kUnused:
      if (render_special) out.append(text);
      return;
    case TokenType::kByte: {
      int byte = parse_byte_token(text);
      if (byte >= 0) {
        out.push_back(static_cast<char>(byte));
      } else {
        out.append(text);
      }
      return;
    }
    default:
      break;
  }
  if (vocab.kind != ModelKind::kBpe) {
    std::string s(text);
    replace_all(s, kEscapedSpace, " ");
    out.append(s);
    return;
  }
  if (type == TokenType::kUserDefined) {  // stored as raw text, not in the byte alphabet
    out.append(text);
    return;
  }
  for (size_t pos = 0; pos < text.size();) {
    Utf8Char c = decode_utf8(text, pos);
    int byte = c.cp == kInvalidCodepoint ? -1 : gpt2_char_to_byte(c.cp);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(text.substr(pos, c.len));
    }
    pos += c.len;
  }
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  const Impl& m = *impl_;
  std::string out;
  out.reserve(ids.size() * 4);
  bool first_text = m.strip_leading_space;
  for (int32_t id : ids) {
    const size_t start = out.size();
    m.append_cached_piece(id, render_special, out);
    if (!first_text) continue;
    // The dummy prefix belongs to the first token that spells text; hidden control tokens
    // (BOS) before it do not count, shown ones do.
    const TokenType type = token_type(id);
    const bool unknown = id == m.vocab.unk;
    const bool hidden = type == TokenType::kControl || type == TokenType::kUnused;
    if (hidden && !unknown && out.size() == start) continue;
    if ((type == TokenType::kNormal || unknown) && out.size() > start && out[start] == ' ') {
      out.erase(start, 1);
    }
    first_text = false;
  }
  return out;
}

std::string Tokenizer::piece(int32_t id, bool render_special) const {
  std::string out;
  impl_->append_cached_piece(id, render_special, out);
  return out;
}

std::string_view Tokenizer::token_text(int32_t id) const {
  return impl_->vocab.valid(id) ? impl_->vocab.text(id) : std::string_view();
}

TokenType Tokenizer::token_type(int32_t id) const {
  return impl_->vocab.valid(id) ? impl_->vocab.type(id) : TokenType::kUndefined;
}

int32_t Tokenizer::n_vocab() const {
  return impl_->vocab.size();
}
ModelKind Tokenizer::kind() const {
  return impl_->vocab.kind;
}
std::string_view Tokenizer::model_name() const {
  return impl_->model_name;
}
int32_t Tokenizer::bos() const {
  return impl_->vocab.bos;
}
int32_t Tokenizer::eos() const {
  return impl_->vocab.eos;
}
bool Tokenizer::add_bos() const {
  return impl_->vocab.add_bos && impl_->vocab.bos != kNoToken;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  const auto& eog = impl_->end_of_generation;
  return std::binary_search(eog.begin(), eog.end(), id);
}

const std::vector<int32_t>& Tokenizer::end_of_generation() const {
  return impl_->end_of_generation;
}

}  // namespace tokenizer
