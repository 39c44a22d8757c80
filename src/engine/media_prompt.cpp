// Media markers, preparation within the engine's limits, placeholders widened (media_prompt.h).
#include "engine/media_prompt.h"

#include <fmt/format.h>

#include <optional>

#include "mm/image_preprocess.h"

namespace engine {

mm::MediaTokens media_tokens(const tokenizer::Tokenizer& tok) {
  return mm::find_media_tokens([&tok](std::string_view text) -> std::optional<int32_t> {
    const auto ids = tok.encode(text, {.add_bos = false, .parse_special = true});
    if (ids.size() == 1 && tok.token_text(ids[0]) == text) return ids[0];
    return std::nullopt;
  });
}

util::Result<std::shared_ptr<const mm::Media>> prepare_media(const Engine& engine,
                                                             mm::MediaKind kind,
                                                             std::span<const uint8_t> bytes,
                                                             int image_tokens) {
  HR_TRY(engine.takes(kind));
  const mm::Encoders& encoders = *engine.encoders();
  const mm::MediaLimits& limits = encoders.limits();
  if (kind == mm::MediaKind::kAudio) return mm::prepare_audio(bytes, limits.audio_seconds);
  if (image_tokens == 0) image_tokens = limits.image_tokens;
  HR_TRY(mm::check_image_tokens(image_tokens));
  if (image_tokens > limits.image_tokens) {
    return util::errorf(
        "{} image tokens is more than this run takes ({}, its --image-tokens) — ask for fewer",
        image_tokens, limits.image_tokens);
  }
  return mm::prepare_image(bytes, *encoders.projector().vision, image_tokens);
}

util::Status attach_media(Request& request, std::vector<int32_t> ids,
                          std::span<const std::shared_ptr<const mm::Media>> media,
                          const Engine& engine, const tokenizer::Tokenizer& tokenizer) {
  HR_ASSIGN_OR_RETURN(request.media, mm::expand_media(ids, media_tokens(tokenizer), media,
                                                      mm::sees_images_both_ways(engine.spec())));
  request.prompt = std::move(ids);
  return {};
}

}  // namespace engine
