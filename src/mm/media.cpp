// Preparing media for a request and widening their placeholders in the prompt (media.h).
#include "mm/media.h"

#include <mutex>

#include "mm/audio.h"
#include "mm/image_preprocess.h"

namespace mm {
namespace {

// One medium is decoded at a time, whoever asks: the plan prices the buffers of one (the largest
// image decode, a 30 s clip), not one per request thread.
std::mutex& preparation_lock() {
  static std::mutex lock;
  return lock;
}

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace

std::string_view media_kind_name(MediaKind kind) {
  return kind == MediaKind::kImage ? "image" : "audio";
}

util::Result<std::shared_ptr<const Media>> prepare_image(std::span<const uint8_t> bytes,
                                                         const VisionSpec& vision,
                                                         int image_tokens) {
  HR_TRY(check_image_tokens(image_tokens));
  auto media = std::make_shared<Media>();
  media->kind = MediaKind::kImage;
  {
    std::lock_guard lock(preparation_lock());
    HR_ASSIGN_OR_RETURN(Image image, decode_image(bytes));
    HR_ASSIGN_OR_RETURN(media->image, resize_for_budget(image, vision, image_tokens));
  }
  const int across = media->image.width / vision.patch_size,
            down = media->image.height / vision.patch_size;
  media->n_tokens = across * down / (vision.pooling * vision.pooling);
  uint64_t h = fnv1a(0xcbf29ce484222325ull, "image", 5);
  h = fnv1a(h, &media->n_tokens, sizeof media->n_tokens);
  h = fnv1a(h, &media->image.width, sizeof media->image.width);
  media->hash = fnv1a(h, media->image.rgb.data(), media->image.rgb.size());
  return std::shared_ptr<const Media>(std::move(media));
}

util::Result<std::shared_ptr<const Media>> prepare_audio(std::span<const uint8_t> bytes,
                                                         double max_seconds) {
  auto media = std::make_shared<Media>();
  media->kind = MediaKind::kAudio;
  {
    std::lock_guard lock(preparation_lock());
    HR_ASSIGN_OR_RETURN(media->samples, decode_audio(bytes, 16000, max_seconds));
  }
  media->n_tokens = audio_token_count(static_cast<int64_t>(media->samples.size()));
  if (media->n_tokens <= 0) return util::errorf("audio: the clip is too short (under 20 ms)");
  media->hash = fnv1a(fnv1a(0xcbf29ce484222325ull, "audio", 5), media->samples.data(),
                      media->samples.size() * sizeof(float));
  return std::shared_ptr<const Media>(std::move(media));
}

MediaTokens find_media_tokens(
    const std::function<std::optional<int32_t>(std::string_view)>& lookup) {
  auto id = [&](std::string_view text) { return lookup(text).value_or(-1); };
  return {.image_begin = id("<|image>"),
          .image = id("<|image|>"),
          .image_end = id("<image|>"),
          .audio_begin = id("<|audio>"),
          .audio = id("<|audio|>"),
          .audio_end = id("<audio|>")};
}

bool sees_images_both_ways(const model::Spec& text) {
  return text.arch == model::Arch::kGemma4 && text.n_embd_per_layer == 0;
}

util::Result<std::vector<MediaSpan>> expand_media(
    std::vector<int32_t>& ids, const MediaTokens& tokens,
    std::span<const std::shared_ptr<const Media>> media, bool images_both_ways) {
  size_t next[2] = {0, 0};  // the next medium of each kind to place
  auto nth = [&](MediaKind kind) -> const std::shared_ptr<const Media>* {
    size_t& i = next[static_cast<int>(kind)];
    for (; i < media.size(); ++i) {
      if (media[i]->kind == kind) return &media[i++];
    }
    return nullptr;
  };
  size_t n_images = 0, n_audio = 0;
  for (const auto& m : media) (m->kind == MediaKind::kImage ? n_images : n_audio)++;
  for (MediaKind kind : {MediaKind::kImage, MediaKind::kAudio}) {
    const bool image = kind == MediaKind::kImage;
    const size_t wanted = image ? n_images : n_audio;
    const int32_t soft = image ? tokens.image : tokens.audio;
    if (wanted > 0 && (soft < 0 || (image ? tokens.image_begin : tokens.audio_begin) < 0 ||
                       (image ? tokens.image_end : tokens.audio_end) < 0)) {
      return util::errorf(
          "the model's vocabulary has no {} markers (<|{}>, <|{}|>, <{}|>) — is it a Gemma 4 "
          "model?",
          media_kind_name(kind), media_kind_name(kind), media_kind_name(kind),
          media_kind_name(kind));
    }
    const size_t placeholders = soft < 0 ? 0 : std::count(ids.begin(), ids.end(), soft);
    if (placeholders != wanted) {
      return util::errorf(
          "the prompt has {} {} placeholder{} but {} {}{} given — one placeholder per {}",
          placeholders, media_kind_name(kind), placeholders == 1 ? "" : "s", wanted,
          media_kind_name(kind), wanted == 1 ? " was" : "s were", media_kind_name(kind));
    }
  }
  std::vector<int32_t> out;
  std::vector<MediaSpan> spans;
  for (int32_t id : ids) {
    const bool image = id == tokens.image && tokens.image >= 0;
    const bool audio = id == tokens.audio && tokens.audio >= 0;
    if (!image && !audio) {
      out.push_back(id);
      continue;
    }
    const auto* m = nth(image ? MediaKind::kImage : MediaKind::kAudio);
    out.push_back(image ? tokens.image_begin : tokens.audio_begin);
    spans.push_back({.first = static_cast<int>(out.size()),
                     .n_tokens = (*m)->n_tokens,
                     .both_ways = image && images_both_ways,
                     .media = *m});
    out.insert(out.end(), (*m)->n_tokens, id);
    out.push_back(image ? tokens.image_end : tokens.audio_end);
  }
  ids = std::move(out);
  return spans;
}

}  // namespace mm
