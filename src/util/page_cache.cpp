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

}  // namespace util
