// Human-readable sizes and parsing of size arguments such as "8G" or "512MiB".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace util {

// 1185376 → "1.13 MiB". Binary units (KiB = 1024 B); exact bytes below 1 KiB.
std::string format_bytes(uint64_t bytes);

// "8G", "8GiB", "512M", "4096", "1.5G" → bytes (binary units; a bare number is bytes).
Result<uint64_t> parse_bytes(std::string_view text);

}  // namespace util
