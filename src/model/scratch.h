// Activation scratch carved from one allocation; the same layout code sizes it for the planner.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/act_q8.h"
#include "kernels/buffer.h"
#include "kernels/ops.h"
#include "util/aligned_buffer.h"
#include "util/result.h"

namespace model {

// Hands out 64-byte-aligned float arrays from a base pointer. With a null base it only counts,
// so a model's scratch size for planning comes from the very code that lays it out.
class ScratchCarver {
 public:
  explicit ScratchCarver(uint8_t* base) : base_(base) {}
  float* floats(size_t n) { return static_cast<float*>(take(n * sizeof(float))); }
  template <class T>
  T* array(size_t n) {
    return static_cast<T*>(take(n * sizeof(T)));
  }
  // A device's decode buffers, for batches of at most kActQ8MaxTokens rows: the 8-bit form of
  // `rows` rows of `width` values (act_q8.h; null for a width that has none), and attention's
  // split states (AttentionBatch::partials).
  void* act_q8(size_t rows, size_t width) {
    return kernels::act_q8_fits(width) ? take(rows * kernels::act_q8_row_bytes(width)) : nullptr;
  }
  float* attn_partials(size_t rows, size_t n_head, size_t head_dim) {
    return floats(kernels::attn_partials_floats(rows, n_head, head_dim));
  }
  size_t bytes() const { return offset_; }

 private:
  void* take(size_t bytes) {
    void* p = base_ ? base_ + offset_ : nullptr;
    offset_ += (bytes + 63) / 64 * 64;
    return p;
  }
  uint8_t* base_;
  size_t offset_ = 0;
};

// The activation workspace: host memory on a host backend, the backend's own on a device.
class Workspace {
 public:
  util::Result<uint8_t*> allocate(kernels::Backend& ops, size_t bytes) {
    size_ = bytes;
    if (!ops.host_memory()) {
      auto b = kernels::Buffer::make(ops, bytes);
      if (!b)
        return util::errorf("model: cannot allocate {} bytes of activations on {}", bytes,
                            ops.name());
      device_ = std::move(*b);
      return device_.get<uint8_t>();
    }
    host_ = util::AlignedBuffer(bytes);
    if (!host_.ok()) return util::errorf("model: cannot allocate {} bytes of activations", bytes);
    return host_.data();
  }
  size_t size() const { return size_; }

 private:
  util::AlignedBuffer host_;
  kernels::Buffer device_;
  size_t size_ = 0;
};

}  // namespace model
