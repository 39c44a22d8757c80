// The host-memory defaults of kernels::Backend's memory functions (ops.h).
#include "kernels/ops.h"

#include <cstring>
#include <new>

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

}  // namespace kernels
