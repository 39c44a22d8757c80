// kernels::Buffer — one allocation of a backend's memory (kernels/ops.h), released with it; and
// kernels::Staged, an array the host fills and the ops read.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/ops.h"
#include "util/result.h"

namespace kernels {

class Buffer {
 public:
  Buffer() = default;
  static util::Result<Buffer> make(Backend& backend, size_t bytes) {
    Buffer b;
    HR_ASSIGN_OR_RETURN(b.data_, backend.allocate(bytes));
    b.backend_ = &backend;
    b.size_ = bytes;
    return b;
  }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = std::exchange(o.backend_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  template <class T = void>
  T* get() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return size_; }

 private:
  void reset() {
    if (backend_ != nullptr) backend_->release(data_);
    backend_ = nullptr;
    data_ = nullptr;
    size_ = 0;
  }
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// An array the host fills and the ops read. On a host backend the ops read the host array itself;
// on a device backend push() uploads it to a device copy of the same size.
template <class T>
class Staged {
 public:
  util::Status init(Backend& backend, size_t n) {
    backend_ = &backend;
    host_.assign(n, T{});
    on_device_ = !backend.host_memory();
    if (on_device_) {
      HR_ASSIGN_OR_RETURN(device_, Buffer::make(backend, n * sizeof(T)));
    }
    return {};
  }
  T* host() { return host_.data(); }
  size_t size() const { return host_.size(); }
  // What the ops take: the device copy, or the host array on a host backend.
  const T* ops() const { return on_device_ ? device_.get<const T>() : host_.data(); }
  // Makes the first n values visible to the ops.
  util::Status push(size_t n) {
    if (!on_device_ || n == 0) return {};
    return backend_->upload(device_.get(), host_.data(), n * sizeof(T));
  }

 private:
  Backend* backend_ = nullptr;
  bool on_device_ = false;
  std::vector<T> host_;
  Buffer device_;
};

}  // namespace kernels
