// Activation scratch carved from one allocation; the same layout code sizes it for the planner.
#pragma once

#include <cstddef>
#include <cstdint>

namespace model {

// Hands out 64-byte-aligned float arrays from a base pointer. With a null base it only counts,
// so a model's scratch size for planning comes from the very code that lays it out.
class ScratchCarver {
 public:
  explicit ScratchCarver(uint8_t* base) : base_(base) {}
  float* floats(size_t n) { return static_cast<float*>(take(n * sizeof(float))); }
  template <class T>
  T* array(size_t n) { return static_cast<T*>(take(n * sizeof(T))); }
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

}  // namespace model
