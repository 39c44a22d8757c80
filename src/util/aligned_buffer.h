// A 64-byte-aligned, zero-filled host allocation that knows its size (for exact accounting).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace util {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kLazyThreshold = 1 << 20;

  enum class Init {
    kNow,   // pages are written (zeroed) at allocation: resident at once
    kLazy,  // large blocks come zeroed from the kernel and are committed only when written,
            // so RAM follows use (the KV pool grows with the tokens actually held)
  };

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes, Init init = Init::kNow) : size_(bytes) {
    if (bytes == 0) return;
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (init == Init::kLazy && rounded >= kLazyThreshold) {
      void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<uint8_t*>(p);
        mapped_ = rounded;
      }
    } else {
      data_ = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, rounded));
      if (data_) std::memset(data_, 0, rounded);
    }
    if (!data_) size_ = 0;
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), mapped_(std::exchange(o.mapped_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      mapped_ = std::exchange(o.mapped_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { release(); }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  template <class T>
  T* as() { return reinterpret_cast<T*>(data_); }
  size_t size() const { return size_; }
  bool ok() const { return size_ == 0 || data_ != nullptr; }

 private:
  void release() {
    if (mapped_) ::munmap(data_, mapped_);
    else std::free(data_);
    data_ = nullptr;
  }
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes mapped with mmap (0 when from aligned_alloc)
};

}  // namespace util
