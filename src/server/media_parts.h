// server: the OpenAI content parts that carry media — {"type":"image_url","image_url":{"url":
// "data:image/png;base64,…","detail":…}} and {"type":"input_audio","input_audio":{"data":…,
// "format":"wav"}} — decoded to bytes, each error naming its field. The server fetches nothing
// from the network: an image URL must be a data: URL.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/field_checks.h"

namespace server {

// An image or audio clip of a user message, as sent (decoded and prepared when the request is
// built).
struct MediaPart {
  bool image = true;  // else an audio clip
  std::vector<uint8_t> bytes;
  std::string param;     // the content part that carries it: "messages[0].content[1]"
  int image_tokens = 0;  // "detail":"low" asks for 70; 0: the request's or the run's
};

// Whether a content part's type is one that carries media ("image_url", "input_audio").
bool is_media_part(const Json& part);
// Decodes such a part; throws FieldError naming the field at fault.
MediaPart media_part(const Json& part, const std::string& param);

// RFC 4648 base64 (whitespace between characters skipped); nullopt when it is not valid.
std::optional<std::vector<uint8_t>> decode_base64(std::string_view text);

}  // namespace server
