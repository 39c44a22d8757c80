// CudaBackend's own behaviour, beyond matching the reference (which backend_cases_test.cpp checks
// for every backend from one table, this one included): arguments it cannot serve are refused with
// one line naming the op and the reason, reported once at synchronize(); and the GPUs are listed,
// or why there are none.
//
// Without a GPU (or a driver) the backend tests are skipped with the reason cuda_devices() gives,
// and ctest reports them as skipped. Run on a GPU machine with `ctest -R cuda` (docs/cuda.md).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/backend.h"

namespace {

using kernels::cuda::CudaBackend;
using tensor::DType;

// A device allocation of the backend under test holding a copy of `values`, freed on scope exit.
class DeviceBuffer {
 public:
  template <class T>
  DeviceBuffer(CudaBackend& backend, const std::vector<T>& values) : backend_(backend) {
    const size_t bytes = values.size() * sizeof(T);
    auto p = backend.allocate(bytes);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message());
    if (!p.ok()) return;
    ptr_ = *p;
    auto s = backend.upload(ptr_, values.data(), bytes);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
  }
  ~DeviceBuffer() { backend_.release(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }

 private:
  CudaBackend& backend_;
  void* ptr_ = nullptr;
};

class CudaBackendTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto backend = kernels::cuda::make_cuda_backend(0);
    if (backend.ok()) {
      backend_ = std::move(backend).value().release();
    } else {
      skip_reason_ = new std::string(backend.error().message());
    }
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  void SetUp() override {
    if (backend_ == nullptr) GTEST_SKIP() << *skip_reason_;
  }
  void TearDown() override {
    if (backend_ == nullptr) return;
    auto s = backend_->synchronize();
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
  }
  CudaBackend& gpu() { return *backend_; }

  static CudaBackend* backend_;
  static std::string* skip_reason_;
};
CudaBackend* CudaBackendTest::backend_ = nullptr;
std::string* CudaBackendTest::skip_reason_ = nullptr;

TEST_F(CudaBackendTest, UndecodableWeightTypesAreRefusedWithAReason) {
  DeviceBuffer w_dev(gpu(), std::vector<uint8_t>(64 * 36));
  DeviceBuffer x_dev(gpu(), std::vector<float>(64, 1.0f));
  DeviceBuffer y_dev(gpu(), std::vector<float>(64, 0.0f));
  gpu().matmul({w_dev.get(), DType::kQ8_1, 64, 2, 72}, x_dev.get<float>(), y_dev.get<float>(), 1);
  auto s = gpu().synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("cuda matmul: Q8_1"), std::string::npos)
      << s.error().message();
  EXPECT_EQ(s.error().message().find('\n'), std::string::npos);
  EXPECT_TRUE(gpu().synchronize().ok()) << "the error is reported once";
}

TEST_F(CudaBackendTest, StoreKvRefusesTypesTheCacheCannotHold) {
  DeviceBuffer buf(gpu(), std::vector<float>(256, 1.0f));
  gpu().store_kv(DType::kQ4_K, DType::kF16, 256, buf.get<float>(), buf.get<float>(), nullptr, 1);
  auto s = gpu().synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("cuda store_kv: cache type Q4_K"), std::string::npos)
      << s.error().message();
}

// Runs everywhere: without a GPU, the reason is one line naming CUDA.
TEST(CudaDevices, ListsGpusOrSaysWhyThereAreNone) {
  const auto devices = kernels::cuda::cuda_devices();
  if (!devices.ok()) {
    EXPECT_EQ(devices.error().message().rfind("cuda: ", 0), 0u) << devices.error().message();
    EXPECT_EQ(devices.error().message().find('\n'), std::string::npos);
    return;
  }
  ASSERT_FALSE(devices->empty());
  for (const auto& d : *devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_bytes, 0u);
    EXPECT_GE(d.sm_major, 7);
  }
}

}  // namespace
