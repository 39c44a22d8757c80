// Process memory probes via /proc/self/statm and mincore(2).
#include "util/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

namespace util {

uint64_t process_rss() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<uint64_t>(resident) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

uint64_t resident_bytes(const void* p, size_t n) {
  if (!p || n == 0) return 0;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
  std::vector<unsigned char> pages((end - begin) / page);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, pages.data()) != 0) return 0;
  uint64_t resident = 0;
  for (unsigned char v : pages) resident += (v & 1) ? page : 0;
  return resident;
}

}  // namespace util
