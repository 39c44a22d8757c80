// Process memory probes: resident set size and which pages of a range are resident.
#pragma once

#include <cstddef>
#include <cstdint>

namespace util {

// Resident set size of this process in bytes (from /proc/self/statm).
uint64_t process_rss();
// Highest resident set size of this process in bytes (VmHWM in /proc/self/status), 0 if unknown.
uint64_t peak_rss();
// Restarts the peak at the current RSS (writes 5 to /proc/self/clear_refs); false where the
// kernel refuses, and peak_rss() then still counts from the process start.
bool reset_peak_rss();
// Bytes of [p, p + n) whose pages are resident in RAM (mincore); n rounded out to whole pages.
uint64_t resident_bytes(const void* p, size_t n);
// Bytes of [p, p + n) whose pages this process has mapped in (they count in its RSS; pagemap).
uint64_t mapped_in_bytes(const void* p, size_t n);

}  // namespace util
