// Decoding the content parts that carry media (media_parts.h).
#include "server/media_parts.h"

#include <fmt/format.h>

#include <array>

namespace server {
namespace {

// The decoded value of each base64 character; −1 outside the alphabet.
constexpr std::array<int8_t, 256> base64_values() {
  std::array<int8_t, 256> v{};
  for (auto& x : v) x = -1;
  constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < kAlphabet.size(); ++i) v[static_cast<uint8_t>(kAlphabet[i])] = int8_t(i);
  return v;
}

std::vector<uint8_t> base64_field(std::string_view text, const std::string& param) {
  auto bytes = decode_base64(text);
  if (!bytes) fail(param, "is not valid base64");
  return std::move(*bytes);
}

MediaPart image_part(const Json& part, const std::string& param) {
  const Json* image = field(part, "image_url");
  if (!image) fail(param + ".image_url", "is required: {\"url\":\"data:image/png;base64,…\"}");
  const std::string p = param + ".image_url";
  const Json* url = image->is_object() ? field(*image, "url") : image;
  if (!url || !url->is_string()) fail(p + ".url", "must be a data: URL string");
  const std::string& u = url->get_ref<const std::string&>();
  MediaPart m{.image = true, .param = param};
  if (!u.starts_with("data:")) {
    fail(p + ".url",
         "is not a data: URL — the server fetches nothing from the network; send the image inline "
         "as data:image/png;base64,… (or image/jpeg)");
  }
  const size_t comma = u.find(',');
  if (comma == std::string::npos || !std::string_view(u).substr(0, comma).ends_with(";base64"))
    fail(p + ".url", "must be a base64 data: URL, data:image/png;base64,…");
  m.bytes = base64_field(std::string_view(u).substr(comma + 1), p + ".url");
  if (image->is_object()) {
    if (auto detail = string(*image, "detail", p + ".detail")) {
      if (*detail != "auto" && *detail != "low" && *detail != "high")
        fail(p + ".detail", fmt::format("must be auto, low or high, got '{}'", *detail));
      if (*detail == "low") m.image_tokens = 70;  // Gemma 4's smallest budget
    }
  }
  return m;
}

MediaPart audio_part(const Json& part, const std::string& param) {
  const std::string p = param + ".input_audio";
  const Json* audio = field(part, "input_audio");
  if (!audio || !audio->is_object())
    fail(p, "is required: {\"data\":\"<base64>\",\"format\":\"wav\"}");
  if (auto format = string(*audio, "format", p + ".format")) {
    if (*format != "wav" && *format != "mp3" && *format != "flac" && *format != "ogg")
      fail(p + ".format", fmt::format("must be wav, mp3, flac or ogg, got '{}'", *format));
  }
  const Json* data = field(*audio, "data");
  if (!data || !data->is_string()) fail(p + ".data", "is required: the clip's bytes in base64");
  return {.image = false,
          .bytes = base64_field(data->get_ref<const std::string&>(), p + ".data"),
          .param = param};
}

}  // namespace

bool is_media_part(const Json& part) {
  const Json* type = part.is_object() ? field(part, "type") : nullptr;
  return type && (*type == "image_url" || *type == "input_audio");
}

MediaPart media_part(const Json& part, const std::string& param) {
  return field(part, "type")->get<std::string>() == "image_url" ? image_part(part, param)
                                                                : audio_part(part, param);
}

std::optional<std::vector<uint8_t>> decode_base64(std::string_view text) {
  static constexpr auto kValues = base64_values();
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  uint32_t bits = 0;
  int n_bits = 0, n_chars = 0, n_pad = 0;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++n_pad;
      ++n_chars;
      continue;
    }
    const int v = kValues[static_cast<uint8_t>(c)];
    if (v < 0 || n_pad > 0) return std::nullopt;  // a character after the padding
    bits = (bits << 6) | static_cast<uint32_t>(v);
    n_bits += 6;
    ++n_chars;
    if (n_bits >= 8) {
      n_bits -= 8;
      out.push_back(static_cast<uint8_t>(bits >> n_bits));
    }
  }
  // Whole groups of four, at most two of them padding (unpadded input is accepted too).
  if (n_pad > 2 || (n_pad > 0 && n_chars % 4 != 0) || (n_chars - n_pad) % 4 == 1)
    return std::nullopt;
  return out;
}

}  // namespace server
