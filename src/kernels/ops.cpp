// The host-memory defaults of kernels::Backend's memory functions and audio-encoder ops (ops.h).
#include "kernels/ops.h"

#include <cstring>
#include <new>

#include "kernels/ref/ref.h"

namespace kernels {

namespace {
constexpr std::align_val_t kHostAlignment{64};  // a cache line, as util::AlignedBuffer
}  // namespace

// A host backend's own memory is host memory: both kinds come from the same allocator.
util::Result<void*> Backend::allocate(size_t bytes) {
  return Backend::allocate_host(bytes);
}

void Backend::release(void* ptr) {
  Backend::release_host(ptr);
}

util::Status Backend::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
  return {};
}

void Backend::upload_async(void* dst, const void* host_src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

util::Result<void*> Backend::allocate_host(size_t bytes) {
  void* p = ::operator new(bytes == 0 ? 1 : bytes, kHostAlignment, std::nothrow);
  if (p == nullptr)
    return util::errorf("{}: cannot allocate {} bytes of host memory", name(), bytes);
  return p;
}

void Backend::release_host(void* ptr) {
  if (ptr != nullptr) ::operator delete(ptr, kHostAlignment);
}

util::Status Backend::download(void* host_dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
  return {};
}

// The audio encoder's ops: the reference loops, on host memory (ops.h says who calls them).
void Backend::relu(float* y, int64_t n) {
  ref::relu(y, n);
}
void Backend::silu(float* y, int64_t n) {
  ref::silu_inplace(y, n);
}
void Backend::layer_norm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
                         float eps) {
  ref::layer_norm(x, w, y, n, n_rows, eps);
}
void Backend::glu(const float* x, float* out, int64_t n, int64_t n_rows) {
  ref::glu(x, out, n, n_rows);
}
void Backend::depthwise_conv1d(const float* x, const float* w, float* y, int64_t n_tokens,
                               int64_t n_channels, int kernel) {
  ref::depthwise_conv1d(x, w, y, n_tokens, n_channels, kernel);
}
void Backend::im2col_3x3_s2(const Im2Col3x3S2& a) {
  ref::im2col_3x3_s2(a);
}
void Backend::local_attention(const LocalAttention& a) {
  ref::local_attention(a);
}

}  // namespace kernels
