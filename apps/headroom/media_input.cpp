// Media files for run and chat: read, prepared, placed in prompts (media_input.h).
#include "media_input.h"

#include "engine/media_prompt.h"
#include "util/mapped_file.h"

namespace cli {

void add_media_flags(CLI::App* cmd, MediaFlags& f) {
  cmd->add_option("--image", f.images,
                  "With --mmproj: an image (PNG or JPEG) for the prompt; repeatable. It goes where "
                  "the prompt writes <|image|>, else before the text");
  cmd->add_option("--audio", f.audio,
                  "With --mmproj: an audio clip (WAV, FLAC, Ogg, MP3) for the prompt; repeatable. "
                  "It goes where the prompt writes <|audio|>, else before the text");
}

util::Result<std::shared_ptr<const mm::Media>> load_media(const Session& session,
                                                          mm::MediaKind kind,
                                                          const std::string& path) {
  auto file = util::MappedFile::open(path);
  if (!file) return util::errorf("{}: {}", path, file.error().message());
  auto media = engine::prepare_media(*session.engine, kind, file->bytes());
  if (!media) return util::errorf("{}: {}", path, media.error().message());
  return std::move(*media);
}

util::Result<std::vector<std::shared_ptr<const mm::Media>>> load_media(const Session& session,
                                                                       const MediaFlags& flags) {
  std::vector<std::shared_ptr<const mm::Media>> out;
  for (const auto& path : flags.images) {
    HR_ASSIGN_OR_RETURN(auto m, load_media(session, mm::MediaKind::kImage, path));
    out.push_back(std::move(m));
  }
  for (const auto& path : flags.audio) {
    HR_ASSIGN_OR_RETURN(auto m, load_media(session, mm::MediaKind::kAudio, path));
    out.push_back(std::move(m));
  }
  return out;
}

nlohmann::ordered_json content_parts(std::span<const std::shared_ptr<const mm::Media>> media,
                                     const std::string& text) {
  nlohmann::ordered_json parts = nlohmann::ordered_json::array();
  for (const auto& m : media) parts.push_back({{"type", mm::media_kind_name(m->kind)}});
  parts.push_back({{"type", "text"}, {"text", text}});
  return parts;
}

util::Status place_media(engine::Request& request, const std::string& text,
                         std::span<const std::shared_ptr<const mm::Media>> media,
                         const Session& session, bool parse_special) {
  const tokenizer::Tokenizer& tok = *session.tokenizer;
  const mm::MediaTokens markers = engine::media_tokens(tok);
  constexpr std::string_view kImage = "<|image|>", kAudio = "<|audio|>";
  std::vector<int32_t> ids;
  auto add_text = [&](std::string_view piece) {
    const auto piece_ids =
        tok.encode(piece, {.add_bos = ids.empty(), .parse_special = parse_special});
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  };
  const bool marked =
      text.find(kImage) != std::string::npos || text.find(kAudio) != std::string::npos;
  if (!marked) {
    add_text("");
    for (const auto& m : media)
      ids.push_back(m->kind == mm::MediaKind::kImage ? markers.image : markers.audio);
  }
  size_t at = 0;
  for (;;) {
    const size_t image = text.find(kImage, at), audio = text.find(kAudio, at);
    const size_t next = std::min(image, audio);
    if (next == std::string::npos) break;
    add_text(std::string_view(text).substr(at, next - at));
    ids.push_back(next == image ? markers.image : markers.audio);
    at = next + (next == image ? kImage.size() : kAudio.size());
  }
  add_text(std::string_view(text).substr(at));
  return engine::attach_media(request, std::move(ids), media, *session.engine, tok);
}

}  // namespace cli
