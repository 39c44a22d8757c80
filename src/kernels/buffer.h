// kernels::Buffer — one allocation of a backend's memory (kernels/ops.h), or of host memory it
// copies from without stalling (allocate_host), released with it; and kernels::Staged, arrays the
// host fills and the ops read.
#pragma once

#include <cstddef>
#include <new>
#include <utility>

#include "kernels/ops.h"
#include "util/result.h"

namespace kernels {

class Buffer {
 public:
  Buffer() = default;
  // Backend memory (what the ops read and write).
  static util::Result<Buffer> make(Backend& backend, size_t bytes) {
    return make(backend, bytes, false);
  }
  // Host memory for upload_async.
  static util::Result<Buffer> make_host(Backend& backend, size_t bytes) {
    return make(backend, bytes, true);
  }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = std::exchange(o.backend_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      host_ = o.host_;
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
  static util::Result<Buffer> make(Backend& backend, size_t bytes, bool host) {
    Buffer b;
    HR_ASSIGN_OR_RETURN(b.data_, host ? backend.allocate_host(bytes) : backend.allocate(bytes));
    b.backend_ = &backend;
    b.size_ = bytes;
    b.host_ = host;
    return b;
  }
  void reset() {
    if (backend_ != nullptr) {
      if (host_)
        backend_->release_host(data_);
      else
        backend_->release(data_);
    }
    backend_ = nullptr;
    data_ = nullptr;
    size_ = 0;
  }
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool host_ = false;
};

// An array of n values the host fills and the ops read. On a host backend the ops read the host
// array itself. On a device backend push() queues a copy to a device array (upload_async), so the
// host array must stay unchanged until the backend's next synchronize().
template <class T>
class Staged {
 public:
  util::Status init(Backend& backend, size_t n) {
    backend_ = &backend;
    on_device_ = !backend.host_memory();
    HR_ASSIGN_OR_RETURN(host_, Buffer::make_host(backend, n * sizeof(T)));
    for (size_t i = 0; i < n; ++i) new (host_.get<T>() + i) T{};
    if (on_device_) {
      HR_ASSIGN_OR_RETURN(device_, Buffer::make(backend, n * sizeof(T)));
    }
    return {};
  }
  T* host() { return host_.get<T>(); }
  // What the ops take: the device array, or the host array on a host backend.
  const T* ops() const { return on_device_ ? device_.get<const T>() : host_.get<const T>(); }
  // Queues the first `count` values for the ops.
  void push(size_t count) {
    if (on_device_ && count > 0) backend_->upload_async(device_.get(), host(), count * sizeof(T));
  }

 private:
  Backend* backend_ = nullptr;
  bool on_device_ = false;
  Buffer host_, device_;
};

}  // namespace kernels
