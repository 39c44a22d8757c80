// Process memory probes: RSS from /proc/self/statm; resident bytes via the page-cache probe.
#include "util/memory.h"

#include <unistd.h>

#include <cstdio>

#include "util/page_cache.h"

namespace util {

uint64_t process_rss() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<uint64_t>(resident) * page_size() : 0;
}

uint64_t peak_rss() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "VmHWM: %lu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return static_cast<uint64_t>(kib) * 1024;
}

bool reset_peak_rss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool written = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && written;
}

uint64_t resident_bytes(const void* p, size_t n) {
  if (!p || n == 0) return 0;
  auto pages = resident_pages({static_cast<const uint8_t*>(p), n});
  return pages ? *pages * page_size() : 0;
}

uint64_t mapped_in_bytes(const void* p, size_t n) {
  if (!p || n == 0) return 0;
  auto pages = mapped_in_pages({static_cast<const uint8_t*>(p), n});
  return pages ? *pages * page_size() : 0;
}

}  // namespace util
