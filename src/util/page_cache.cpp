// Page-cache probes with fsync, posix_fadvise and mincore (Linux).
#include "util/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace util {

size_t page_size() {
  return static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

Status drop_from_page_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errorf("cannot open {}: {}", path, std::strerror(errno));
  // Dirty pages cannot be dropped: write them back first.
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return errorf("cannot fsync {}: {}", path, std::strerror(err));
  }
  const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  if (rc != 0) return errorf("cannot drop {} from the page cache: {}", path, std::strerror(rc));
  return {};
}

Result<std::vector<unsigned char>> resident_map(std::span<const uint8_t> range) {
  if (range.empty()) return std::vector<unsigned char>{};
  const size_t page = page_size();
  const auto begin = reinterpret_cast<uintptr_t>(range.data()) / page * page;
  const auto end = reinterpret_cast<uintptr_t>(range.data() + range.size());
  const size_t n_pages = (end - begin + page - 1) / page;
  std::vector<unsigned char> in_core(n_pages);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, in_core.data()) != 0) {
    return errorf("mincore failed on {} bytes: {}", end - begin, std::strerror(errno));
  }
  for (unsigned char& c : in_core) c &= 1;  // the other bits are reserved
  return in_core;
}

Result<size_t> resident_pages(std::span<const uint8_t> range) {
  HR_ASSIGN_OR_RETURN(auto in_core, resident_map(range));
  return static_cast<size_t>(std::count(in_core.begin(), in_core.end(), 1));
}

Result<size_t> mapped_in_pages(std::span<const uint8_t> range) {
  if (range.empty()) return size_t{0};
  const size_t page = page_size();
  const uintptr_t first = reinterpret_cast<uintptr_t>(range.data()) / page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(range.data() + range.size()) - 1) / page;
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errorf("cannot read /proc/self/pagemap: {}", std::strerror(errno));
  // One 64-bit entry per page; bit 63: present in RAM, bit 62: swapped out (both count in RSS
  // only when present).
  std::vector<uint64_t> entries(std::min<uintptr_t>(last - first + 1, 1 << 16));
  size_t present = 0;
  for (uintptr_t at = first; at <= last;) {
    const size_t n = std::min<uintptr_t>(entries.size(), last - at + 1);
    const ssize_t got = ::pread(fd, entries.data(), n * sizeof(uint64_t),
                                static_cast<off_t>(at * sizeof(uint64_t)));
    if (got != static_cast<ssize_t>(n * sizeof(uint64_t))) {
      const int err = errno;
      ::close(fd);
      return errorf("reading /proc/self/pagemap failed: {}",
                    got < 0 ? std::strerror(err) : "short read");
    }
    for (size_t i = 0; i < n; ++i) present += entries[i] >> 63;
    at += n;
  }
  ::close(fd);
  return present;
}

}  // namespace util
