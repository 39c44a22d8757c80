// Images and audio from the command line: run's --image/--audio, chat's /image and /audio — files
// read and prepared for the session's engine, and placed in a prompt.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generation.h"
#include "mm/media.h"

namespace cli {

struct MediaFlags {
  std::vector<std::string> images, audio;  // files, in order
  bool empty() const { return images.empty() && audio.empty(); }
};
void add_media_flags(CLI::App* cmd, MediaFlags& flags);

// One file read and prepared for the session's engine; errors name the file.
util::Result<std::shared_ptr<const mm::Media>> load_media(const Session& session,
                                                          mm::MediaKind kind,
                                                          const std::string& path);
// Every file of the flags: images first, then clips, each in order.
util::Result<std::vector<std::shared_ptr<const mm::Media>>> load_media(const Session& session,
                                                                       const MediaFlags& flags);

// A chat message's content parts for a user turn: one {"type":"image"} or {"type":"audio"} part
// per medium (what Gemma 4's template turns into placeholders), then the text.
nlohmann::ordered_json content_parts(std::span<const std::shared_ptr<const mm::Media>> media,
                                     const std::string& text);

// Raw prompt text with media: each placeholder text (<|image|>, <|audio|>) marks where a medium
// goes, in order; without any, the media go before the text. Control-token text elsewhere becomes
// tokens only with parse_special.
util::Status place_media(engine::Request& request, const std::string& text,
                         std::span<const std::shared_ptr<const mm::Media>> media,
                         const Session& session, bool parse_special);

}  // namespace cli
