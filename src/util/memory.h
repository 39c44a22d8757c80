// Process memory probes: resident set size and which pages of a range are resident.
#pragma once

#include <cstddef>
#include <cstdint>

namespace util {

// Resident set size of this process in bytes (from /proc/self/statm).
uint64_t process_rss();
// Bytes of [p, p + n) whose pages are resident in RAM (mincore); n rounded out to whole pages.
uint64_t resident_bytes(const void* p, size_t n);

}  // namespace util
