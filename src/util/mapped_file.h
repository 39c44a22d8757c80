// Read-only memory mapping of a whole file: the way model weights are read without copying.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "util/result.h"

namespace util {

class MappedFile {
 public:
  // Maps `path` read-only. An empty file maps to an empty span.
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Hints that a byte range will be read soon (e.g. weights before the first token).
  void prefetch(size_t offset, size_t length) const;
  // Drops a byte range that was read and will not be read again from this process's memory
  // (the pages stay in the page cache): a pass over a large file keeps a bounded footprint.
  void release(size_t offset, size_t length) const;
  // Hints that a byte range is streamed whole, again and again (weights every token reads): the
  // kernel may then cache and map it in 2 MiB pages, with fewer TLB misses while it streams. The
  // range is widened to whole 2 MiB pages so that its ends can be mapped so too. Only pages not
  // yet in the page cache come in large; a no-op where unsupported.
  void advise_huge_pages(size_t offset, size_t length) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace util
