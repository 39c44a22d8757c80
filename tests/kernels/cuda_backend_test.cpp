// CudaBackend's ops against the reference backend on random inputs of awkward sizes, with the
// tolerances the CPU tests state (tests/kernels/cpu_backend_test.cpp, cpu_matmul_test.cpp): every
// weight type through matmul (decode and prefill kernels) and get_rows, attention over paged
// f32/f16/q8_0/q4_0 caches, store_kv byte for byte, and the small ops.
//
// Without a GPU (or a driver) every test is skipped with the reason cuda_devices() gives, and ctest
// reports it as skipped. Run on a GPU machine with `ctest -R cuda` (docs/cuda.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/backend.h"
#include "kernels/ref/ref.h"
#include "tensor/blocks.h"
#include "tensor/dequantize.h"
#include "tensor/fp16.h"
#include "tensor/quantize.h"

namespace {

using kernels::AttentionBatch;
using kernels::KvSpan;
using kernels::Matrix;
using kernels::cuda::CudaBackend;
using tensor::DType;

std::vector<float> random_floats(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(n);
  for (auto& f : v) f = dist(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// |a − b| ≤ abs + rel·|b| at every index; reports the first index outside.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, float rel,
                  float abs = 0.0f) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_LE(std::fabs(a[i] - b[i]), abs + rel * std::fabs(b[i]))
        << "at " << i << ": " << a[i] << " vs reference " << b[i];
  }
}

// A device allocation of the backend under test, freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer(CudaBackend& backend, size_t bytes) : backend_(backend) {
    auto p = backend.allocate(bytes);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message());
    if (p.ok()) ptr_ = *p;
  }
  template <class T>
  DeviceBuffer(CudaBackend& backend, const std::vector<T>& values)
      : DeviceBuffer(backend, values.size() * sizeof(T)) {
    auto s = backend.upload(ptr_, values.data(), values.size() * sizeof(T));
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
  }
  ~DeviceBuffer() { backend_.release(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  // The first n values, after every op issued so far has finished (and succeeded).
  template <class T>
  std::vector<T> read(size_t n) const {
    std::vector<T> out(n);
    auto s = backend_.download(out.data(), ptr_, n * sizeof(T));
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
    return out;
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

// --- Weights of every type -----------------------------------------------------------------------

// Random normal values quantized by the reference quantizer, or, for types without one, random
// bytes with sane scales (as tests/kernels/cpu_matmul_test.cpp builds them).
std::vector<uint8_t> make_weights(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  const size_t row_bytes = static_cast<size_t>(tensor::row_bytes(type, cols));
  std::vector<uint8_t> bytes(row_bytes * rows);
  const auto values = random_floats(static_cast<size_t>(rows * cols), seed, 0.5f);
  if (tensor::can_quantize(type)) {
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(
          tensor::quantize_row(type, values.data() + r * cols, bytes.data() + r * row_bytes, cols)
              .ok());
    }
    return bytes;
  }
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const size_t block_bytes =
      static_cast<size_t>(tensor::row_bytes(type, tensor::block_values(type)));
  if (type == DType::kMXFP4) {  // a power-of-two scale of 2^-8 .. 2^-1
    for (size_t off = 0; off < bytes.size(); off += block_bytes)
      bytes[off] = static_cast<uint8_t>(120 + rng() % 8);
    return bytes;
  }
  if (type ==
      DType::kNVFP4) {  // UE4M3 scales of 2^-4 .. 2^-1, and one subnormal and one zero scale
    for (size_t off = 0; off < bytes.size(); off += block_bytes) {
      for (int s = 0; s < 4; ++s) bytes[off + s] = static_cast<uint8_t>(0x18 + rng() % 32);
    }
    bytes[0] = 0x05;
    if (bytes.size() > 1) bytes[1] = 0x00;
    return bytes;
  }
  std::vector<size_t> scales;
  if (type == DType::kQ2_K)
    scales = {offsetof(tensor::BlockQ2_K, d), offsetof(tensor::BlockQ2_K, dmin)};
  if (type == DType::kQ3_K) scales = {offsetof(tensor::BlockQ3_K, d)};
  if (type == DType::kIQ4_XS) scales = {offsetof(tensor::BlockIQ4_XS, d)};
  if (type == DType::kIQ4_NL) scales = {offsetof(tensor::BlockIQ4_NL, d)};
  if (type == DType::kTQ1_0) scales = {offsetof(tensor::BlockTQ1_0, d)};
  if (type == DType::kTQ2_0) scales = {offsetof(tensor::BlockTQ2_0, d)};
  EXPECT_FALSE(scales.empty()) << "no scale layout for " << tensor::dtype_name(type);
  for (size_t off = 0; off < bytes.size(); off += block_bytes) {
    for (size_t field : scales) {
      const uint16_t d = tensor::f32_to_f16(0.01f * static_cast<float>(1 + rng() % 8));
      std::memcpy(&bytes[off + field], &d, 2);
    }
  }
  return bytes;
}

struct TypeCase {
  DType type;
  std::vector<int64_t> cols;  // not multiples of 32 where the type allows
};

const std::vector<TypeCase> kTypeCases = {
    {DType::kF32, {1, 7, 33, 4099}},  {DType::kF16, {1, 9, 40, 4103}},
    {DType::kBF16, {3, 16, 4100}},    {DType::kQ8_0, {32, 96, 4128}},
    {DType::kQ4_0, {32, 96, 4128}},   {DType::kQ5_0, {32, 96, 4128}},
    {DType::kQ4_1, {32, 96, 4128}},   {DType::kQ5_1, {32, 96, 4128}},
    {DType::kQ4_K, {256, 768, 4352}}, {DType::kQ5_K, {256, 768, 4352}},
    {DType::kQ6_K, {256, 768, 4352}}, {DType::kIQ4_XS, {256, 768, 4352}},
    {DType::kQ2_K, {256, 768}},       {DType::kQ3_K, {256, 768}},
    {DType::kQ8_K, {256, 768}},       {DType::kIQ4_NL, {32, 96, 544}},
    {DType::kTQ1_0, {256, 768}},      {DType::kTQ2_0, {256, 768}},
    {DType::kMXFP4, {32, 96, 544}},   {DType::kNVFP4, {64, 192, 576}},
};

// f32 summation order against the reference's double sums: 1e-5 of Σ|w_c·x_c| (the CPU tests'
// bound for f32 partners, tests/kernels/cpu_matmul_test.cpp).
double matmul_tolerance(const float* w_row, const float* x, int64_t n) {
  double magnitude = 0;
  for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(static_cast<double>(w_row[i]) * x[i]);
  return 1e-5 * magnitude + 1e-6;
}

TEST_F(CudaBackendTest, MatmulMatchesTheReferenceForEveryTypeAndBatch) {
  for (const TypeCase& c : kTypeCases) {
    for (int64_t cols : c.cols) {
      for (int64_t rows : {int64_t{5}, int64_t{67}}) {
        const auto bytes = make_weights(c.type, rows, cols, static_cast<uint32_t>(cols + rows));
        const size_t row_bytes = static_cast<size_t>(tensor::row_bytes(c.type, cols));
        std::vector<float> dequantized(rows * cols);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_TRUE(tensor::dequantize_row(c.type, bytes.data() + r * row_bytes,
                                             dequantized.data() + r * cols, cols)
                          .ok());
        }
        DeviceBuffer w_dev(gpu(), bytes);
        const Matrix host_w{bytes.data(), c.type, cols, rows, row_bytes};
        const Matrix dev_w{w_dev.get(), c.type, cols, rows, row_bytes};
        for (int n_tokens : {1, 3, 8, 17, 64, 67}) {  // ≤ 8: matvec; above: the tiled kernel
          SCOPED_TRACE(testing::Message() << tensor::dtype_name(c.type) << " cols " << cols
                                          << " rows " << rows << " tokens " << n_tokens);
          const auto x = random_floats(static_cast<size_t>(n_tokens * cols), 7 + n_tokens);
          std::vector<float> ref(static_cast<size_t>(n_tokens * rows));
          kernels::ref::matmul(host_w, x.data(), ref.data(), n_tokens);
          DeviceBuffer x_dev(gpu(), x);
          DeviceBuffer y_dev(
              gpu(), std::vector<float>(ref.size(), NAN));  // poisoned: every value must be written
          gpu().matmul(dev_w, x_dev.get<float>(), y_dev.get<float>(), n_tokens);
          const auto y = y_dev.read<float>(ref.size());
          for (int t = 0; t < n_tokens; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const size_t i = static_cast<size_t>(t * rows + r);
              ASSERT_NEAR(
                  y[i], ref[i],
                  matmul_tolerance(dequantized.data() + r * cols, x.data() + t * cols, cols))
                  << "token " << t << " row " << r;
            }
          }
        }
      }
    }
  }
}

TEST_F(CudaBackendTest, GetRowsIsExactForEveryType) {
  for (const TypeCase& c : kTypeCases) {
    const int64_t cols = c.cols.back(), rows = 50;
    const auto bytes = make_weights(c.type, rows, cols, 8);
    const size_t row_bytes = static_cast<size_t>(tensor::row_bytes(c.type, cols));
    DeviceBuffer table_dev(gpu(), bytes);
    const Matrix host_t{bytes.data(), c.type, cols, rows, row_bytes};
    const Matrix dev_t{table_dev.get(), c.type, cols, rows, row_bytes};
    for (int n : {1, 3, 200}) {
      std::vector<int32_t> ids(n);
      for (int i = 0; i < n; ++i) ids[i] = (i * 31 + 7) % rows;
      DeviceBuffer ids_dev(gpu(), ids);
      for (float s : {1.0f, 3.5f}) {
        std::vector<float> expected(static_cast<size_t>(n * cols));
        kernels::ref::get_rows(host_t, ids.data(), n, s, expected.data());
        DeviceBuffer out_dev(gpu(), std::vector<float>(expected.size(), NAN));
        gpu().get_rows(dev_t, ids_dev.get<int32_t>(), n, s, out_dev.get<float>());
        EXPECT_TRUE(same_bits(out_dev.read<float>(expected.size()), expected))
            << tensor::dtype_name(c.type) << " n " << n << " scale " << s;
      }
    }
  }
}

TEST_F(CudaBackendTest, UndecodableWeightTypesAreRefusedWithAReason) {
  std::vector<uint8_t> bytes(64 * 36);
  DeviceBuffer w_dev(gpu(), bytes);
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

// --- Attention and the cache ---------------------------------------------------------------------

bool is_block_type(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0;
}

// A cache of `n_cells` cells in blocks of 16 with random K/V rows, some cells empty (−1) and
// positions not in cell order (as a ring leaves them); on the host for the reference and copied to
// the device, KvSpan included.
struct Cache {
  static constexpr int kCellsPerBlock = 16;
  std::vector<std::vector<uint8_t>> k_storage, v_storage;
  std::vector<const uint8_t*> k_blocks, v_blocks;
  std::vector<int32_t> pos;
  KvSpan span;
  std::vector<std::unique_ptr<DeviceBuffer>> device;  // blocks, block tables, positions, the span
  const KvSpan* device_span = nullptr;

  Cache(CudaBackend& gpu, DType k_type, DType v_type, int n_head_kv, int head_dim, int n_cells,
        uint32_t seed) {
    const int kv_dim = n_head_kv * head_dim;
    const size_t k_row = tensor::row_bytes(k_type, kv_dim),
                 v_row = tensor::row_bytes(v_type, kv_dim);
    const int n_blocks = (n_cells + kCellsPerBlock - 1) / kCellsPerBlock;
    for (int b = 0; b < n_blocks; ++b) {
      k_storage.emplace_back(k_row * kCellsPerBlock);
      v_storage.emplace_back(v_row * kCellsPerBlock);
    }
    const auto k = random_floats(static_cast<size_t>(n_cells) * kv_dim, seed);
    const auto v = random_floats(static_cast<size_t>(n_cells) * kv_dim, seed + 1);
    for (int c = 0; c < n_cells; ++c) {
      uint8_t* kd = k_storage[c / kCellsPerBlock].data() + (c % kCellsPerBlock) * k_row;
      uint8_t* vd = v_storage[c / kCellsPerBlock].data() + (c % kCellsPerBlock) * v_row;
      EXPECT_TRUE(tensor::quantize_row(k_type, k.data() + c * kv_dim, kd, kv_dim).ok());
      EXPECT_TRUE(tensor::quantize_row(v_type, v.data() + c * kv_dim, vd, kv_dim).ok());
      pos.push_back(c % 7 == 6 ? -1 : (c + 5) % n_cells);
    }
    for (auto& s : k_storage) k_blocks.push_back(s.data());
    for (auto& s : v_storage) v_blocks.push_back(s.data());
    span = {k_type,          v_type,          n_head_kv, head_dim, n_cells,   kCellsPerBlock,
            k_blocks.data(), v_blocks.data(), k_row,     v_row,    pos.data()};

    std::vector<const uint8_t*> k_dev, v_dev;
    for (int b = 0; b < n_blocks; ++b) {
      device.push_back(std::make_unique<DeviceBuffer>(gpu, k_storage[b]));
      k_dev.push_back(device.back()->get<uint8_t>());
      device.push_back(std::make_unique<DeviceBuffer>(gpu, v_storage[b]));
      v_dev.push_back(device.back()->get<uint8_t>());
    }
    device.push_back(std::make_unique<DeviceBuffer>(gpu, k_dev));
    const auto* k_table = device.back()->get<const uint8_t* const>();
    device.push_back(std::make_unique<DeviceBuffer>(gpu, v_dev));
    const auto* v_table = device.back()->get<const uint8_t* const>();
    device.push_back(std::make_unique<DeviceBuffer>(gpu, pos));
    const auto* pos_dev = device.back()->get<int32_t>();
    KvSpan dev = span;
    dev.k_blocks = k_table;
    dev.v_blocks = v_table;
    dev.cell_pos = pos_dev;
    device.push_back(std::make_unique<DeviceBuffer>(gpu, std::vector<KvSpan>{dev}));
    device_span = device.back()->get<KvSpan>();
  }
};

// The CPU tests' attention tolerance: the reference sums in double over two passes; the kernel in
// f32 with an online softmax.
constexpr float kAttentionTolerance = 2e-5f;

TEST_F(CudaBackendTest, AttentionMatchesTheReferenceOverQuantizedPagedCaches) {
  const DType types[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0};
  for (int head_dim : {8, 64, 256, 512}) {
    for (int n_head_kv : {4, 1}) {
      for (DType k_type : types) {
        for (DType v_type : types) {
          if ((is_block_type(k_type) || is_block_type(v_type)) && (n_head_kv * head_dim) % 32)
            continue;
          for (int window : {0, 6}) {
            SCOPED_TRACE(testing::Message() << "head_dim " << head_dim << " n_head_kv " << n_head_kv
                                            << " K " << tensor::dtype_name(k_type) << " V "
                                            << tensor::dtype_name(v_type) << " window " << window);
            constexpr int kHeads = 8, kTokens = 3;
            // Two sequences (37 and 300 cells, neither a multiple of the block), tokens of both.
            Cache a(gpu(), k_type, v_type, n_head_kv, head_dim, 37,
                    static_cast<uint32_t>(head_dim));
            Cache b(gpu(), k_type, v_type, n_head_kv, head_dim, 300, 7);
            const auto q = random_floats(static_cast<size_t>(kTokens) * kHeads * head_dim, 99);
            const std::vector<int32_t> pos = {3, 250, 36};
            std::vector<float> ref(q.size());
            const KvSpan* spans[kTokens] = {&a.span, &b.span, &a.span};
            const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
            kernels::ref::attention({kTokens, kHeads, head_dim, q.data(), ref.data(), pos.data(),
                                     spans, window, scale});

            DeviceBuffer q_dev(gpu(), q), pos_dev(gpu(), pos);
            DeviceBuffer out_dev(gpu(), std::vector<float>(q.size(), NAN));
            DeviceBuffer kv_dev(
                gpu(), std::vector<const KvSpan*>{a.device_span, b.device_span, a.device_span});
            gpu().attention({kTokens, kHeads, head_dim, q_dev.get<float>(), out_dev.get<float>(),
                             pos_dev.get<int32_t>(), kv_dev.get<const KvSpan* const>(), window,
                             scale});
            expect_close(out_dev.read<float>(q.size()), ref, kAttentionTolerance,
                         kAttentionTolerance);
          }
        }
      }
    }
  }
}

TEST_F(CudaBackendTest, AttentionWithNothingVisibleIsZero) {
  Cache cache(gpu(), DType::kF16, DType::kQ8_0, 1, 64, 20, 3);
  std::vector<int32_t> future(cache.pos.size(), 50);  // every key is in the query's future
  ASSERT_TRUE(
      gpu()
          .upload(cache.device[cache.device.size() - 2]->get(), future.data(), future.size() * 4)
          .ok());
  const auto q = random_floats(2 * 64, 4);
  DeviceBuffer q_dev(gpu(), q), pos_dev(gpu(), std::vector<int32_t>{10});
  DeviceBuffer out_dev(gpu(), std::vector<float>(q.size(), 1.0f));
  DeviceBuffer kv_dev(gpu(), std::vector<const KvSpan*>{cache.device_span});
  gpu().attention({1, 2, 64, q_dev.get<float>(), out_dev.get<float>(), pos_dev.get<int32_t>(),
                   kv_dev.get<const KvSpan* const>(), 0, 0.125f});
  const auto out = out_dev.read<float>(q.size());
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return v == 0.0f; }));
}

TEST_F(CudaBackendTest, StoreKvWritesTheReferenceBytes) {
  const DType types[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0};
  for (DType k_type : types) {
    for (DType v_type : types) {
      for (int n : {1, 5, 130}) {
        constexpr int kKvDim = 96;
        auto k = random_floats(static_cast<size_t>(n) * kKvDim, 12, 2.0f);
        const auto v = random_floats(static_cast<size_t>(n) * kKvDim, 13);
        k[0] = 3e-6f;                  // f16 subnormal
        k[1] = 7e4f;                   // f16 overflow to inf
        k[2] = 1.0f + 1.0f / 2048.0f;  // a rounding tie
        const size_t k_row = tensor::row_bytes(k_type, kKvDim),
                     v_row = tensor::row_bytes(v_type, kKvDim);
        // The V rows start 16-byte aligned after the K rows: destinations must be aligned to
        // their type, as in the cache (tensor::quantize_row refuses others, so the reference
        // would write nothing there).
        const size_t v_start = (n * k_row + 15) / 16 * 16;
        const size_t total = v_start + n * v_row;
        // Rows in reverse order, so the destinations are not one contiguous run.
        auto rows = [&](uint8_t* base) {
          std::vector<kernels::KvWrite> dst(n);
          for (int t = 0; t < n; ++t)
            dst[t] = {base + (n - 1 - t) * k_row, base + v_start + (n - 1 - t) * v_row};
          return dst;
        };
        std::vector<uint8_t> expected(total, 0xAB);
        kernels::ref::store_kv(k_type, v_type, kKvDim, k.data(), v.data(),
                               rows(expected.data()).data(), n);
        DeviceBuffer bytes_dev(gpu(), std::vector<uint8_t>(total, 0xAB));
        DeviceBuffer dst_dev(gpu(), rows(bytes_dev.get<uint8_t>()));
        DeviceBuffer k_dev(gpu(), k), v_dev(gpu(), v);
        gpu().store_kv(k_type, v_type, kKvDim, k_dev.get<float>(), v_dev.get<float>(),
                       dst_dev.get<kernels::KvWrite>(), n);
        const auto got = bytes_dev.read<uint8_t>(total);
        const auto diff = std::mismatch(got.begin(), got.end(), expected.begin());
        EXPECT_TRUE(diff.first == got.end())
            << "K " << tensor::dtype_name(k_type) << " V " << tensor::dtype_name(v_type) << " n "
            << n << ": first different byte at " << (diff.first - got.begin()) << " of " << total
            << " (V rows start at " << v_start << "): " << int{*diff.first} << " instead of "
            << int{*diff.second};
      }
    }
  }
}

TEST_F(CudaBackendTest, StoreKvRefusesTypesTheCacheCannotHold) {
  DeviceBuffer buf(gpu(), std::vector<float>(256, 1.0f));
  gpu().store_kv(DType::kQ4_K, DType::kF16, 256, buf.get<float>(), buf.get<float>(), nullptr, 1);
  auto s = gpu().synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("cuda store_kv: cache type Q4_K"), std::string::npos)
      << s.error().message();
}

// --- Norm, RoPE, elementwise, routing ------------------------------------------------------------

constexpr int64_t kSizes[] = {1, 7, 8, 9, 100, 40001};

TEST_F(CudaBackendTest, RmsnormMatchesTheReference) {
  for (int64_t n : kSizes) {
    for (int64_t rows : {int64_t{1}, int64_t{3}}) {
      for (bool weighted : {true, false}) {
        SCOPED_TRACE(testing::Message()
                     << "n " << n << " rows " << rows << (weighted ? " weighted" : ""));
        const auto x = random_floats(static_cast<size_t>(n * rows), static_cast<uint32_t>(n), 3.0f);
        const auto w = random_floats(static_cast<size_t>(n), 3);
        std::vector<float> expected(x.size());
        kernels::ref::rmsnorm(x.data(), weighted ? w.data() : nullptr, expected.data(), n, rows,
                              1e-6f);
        DeviceBuffer x_dev(gpu(), x), w_dev(gpu(), w),
            y_dev(gpu(), std::vector<float>(x.size(), NAN));
        const float* wp = weighted ? w_dev.get<float>() : nullptr;
        // The double sum of squares in another order: 1/rms may differ in its last bit (≤ 2 ulp).
        gpu().rmsnorm(x_dev.get<float>(), wp, y_dev.get<float>(), n, rows, 1e-6f);
        expect_close(y_dev.read<float>(x.size()), expected, 2.5e-7f);
        gpu().rmsnorm(x_dev.get<float>(), wp, x_dev.get<float>(), n, rows, 1e-6f);  // in place
        expect_close(x_dev.read<float>(x.size()), expected, 2.5e-7f);
      }
    }
  }
}

TEST_F(CudaBackendTest, RopeIsExact) {
  for (auto style : {kernels::RopeStyle::kAdjacent, kernels::RopeStyle::kRotateHalf}) {
    for (int n_tokens : {1, 5, 300}) {
      constexpr int kHeads = 3, kHeadDim = 24, kRot = 16;
      std::vector<float> inv_freq(kRot / 2);
      for (int i = 0; i < kRot / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / kRot);
      std::vector<int32_t> pos(n_tokens);
      for (int t = 0; t < n_tokens; ++t) pos[t] = (t * 37) % 5000;
      const auto x = random_floats(static_cast<size_t>(n_tokens) * kHeads * kHeadDim, 5);
      auto expected = x;
      kernels::ref::rope(expected.data(), n_tokens, kHeads, kHeadDim, pos.data(),
                         {style, kRot, inv_freq.data()});
      DeviceBuffer x_dev(gpu(), x), pos_dev(gpu(), pos), freq_dev(gpu(), inv_freq);
      gpu().rope(x_dev.get<float>(), n_tokens, kHeads, kHeadDim, pos_dev.get<int32_t>(),
                 {style, kRot, freq_dev.get<float>()});
      // Angles in double; CUDA's double cos/sin (≤ 2 ulp of double) round to the same float as
      // glibc's but for inputs within 2^-52 of a float rounding boundary.
      EXPECT_TRUE(same_bits(x_dev.read<float>(x.size()), expected)) << "tokens " << n_tokens;
    }
  }
}

TEST_F(CudaBackendTest, ExactElementwiseOpsMatchTheReference) {
  kernels::ref::RefBackend ref;
  for (int64_t n : kSizes) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    const auto y = random_floats(n, 1), x = random_floats(n, 2);
    DeviceBuffer x_dev(gpu(), x);
    auto run = [&](auto op) {
      DeviceBuffer y_dev(gpu(), y);
      op(y_dev.get<float>());
      return y_dev.read<float>(n);
    };
    auto expected = y;
    ref.add(expected.data(), x.data(), n);
    EXPECT_TRUE(same_bits(run([&](float* o) { gpu().add(o, x_dev.get<float>(), n); }), expected));
    expected = y;
    ref.mul(expected.data(), x.data(), n);
    EXPECT_TRUE(same_bits(run([&](float* o) { gpu().mul(o, x_dev.get<float>(), n); }), expected));
    expected = y;
    ref.scale(expected.data(), -0.37f, n);
    EXPECT_TRUE(same_bits(run([&](float* o) { gpu().scale(o, -0.37f, n); }), expected));
    EXPECT_TRUE(same_bits(run([&](float* o) { gpu().copy(o, x_dev.get<float>(), n); }), x));
  }
  // Rows between strides, and overlapping (a memmove per row, rows in order).
  for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{300}}) {
    const int64_t n = 70, xs = 101, ys = 83;
    const auto x = random_floats(static_cast<size_t>(rows * xs), 3);
    const auto y = random_floats(static_cast<size_t>(rows * ys), 4);
    auto expected = y;
    ref.copy_rows(expected.data(), ys, x.data(), xs, n, rows);
    DeviceBuffer x_dev(gpu(), x), y_dev(gpu(), y);
    gpu().copy_rows(y_dev.get<float>(), ys, x_dev.get<float>(), xs, n, rows);
    EXPECT_TRUE(same_bits(y_dev.read<float>(y.size()), expected)) << "copy_rows " << rows;
    for (int shift : {5, -5}) {
      expected = y;
      const int64_t to = shift > 0 ? shift : 0, from = shift > 0 ? 0 : -shift;
      ref.copy_rows(expected.data() + to, ys, expected.data() + from, ys, n, rows);
      DeviceBuffer o_dev(gpu(), y);
      gpu().copy_rows(o_dev.get<float>() + to, ys, o_dev.get<float>() + from, ys, n, rows);
      EXPECT_TRUE(same_bits(o_dev.read<float>(y.size()), expected))
          << "overlapping copy_rows " << rows << " by " << shift;
    }
  }
}

std::vector<float> activation_inputs(int64_t n, uint32_t seed) {
  auto v = random_floats(static_cast<size_t>(n), seed, 4.0f);
  const float extremes[] = {0.0f,   -0.0f, 1e-30f, -1e-30f, 20.0f,
                            -20.0f, 90.0f, -90.0f, 1e4f,    -1e4f};
  for (size_t i = 0; i < std::size(extremes) && i < v.size(); ++i)
    v[v.size() - 1 - i] = extremes[i];
  return v;
}

TEST_F(CudaBackendTest, ActivationsMatchTheReferenceWithinTheirTolerance) {
  for (int64_t n : kSizes) {
    for (int64_t rows : {int64_t{1}, int64_t{3}}) {
      SCOPED_TRACE(testing::Message() << "n " << n << " rows " << rows);
      const auto gu = activation_inputs(2 * n * rows, static_cast<uint32_t>(n));
      const float *g = gu.data(), *u = gu.data() + n;
      DeviceBuffer gu_dev(gpu(), gu);
      for (bool gelu : {false, true}) {
        std::vector<float> expected(n * rows);
        (gelu ? kernels::ref::gelu_mul : kernels::ref::silu_mul)(g, u, expected.data(), n, rows,
                                                                 2 * n);
        DeviceBuffer out_dev(gpu(), std::vector<float>(expected.size(), NAN));
        const float* gd = gu_dev.get<float>();
        if (gelu) {
          gpu().gelu_mul(gd, gd + n, out_dev.get<float>(), n, rows, 2 * n);
        } else {
          gpu().silu_mul(gd, gd + n, out_dev.get<float>(), n, rows, 2 * n);
        }
        const auto out = out_dev.read<float>(expected.size());
        // expf/tanhf within 2 ulp: ≤ 1e-6 relative, plus the reference's own loss in 1 + tanh(z)
        // (1.2e-7·|gate·up|), as the CPU tests allow.
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = 0; i < n; ++i) {
            const float want = expected[r * n + i], got = out[r * n + i];
            const float gate = g[r * 2 * n + i], up = u[r * 2 * n + i];
            ASSERT_LE(std::fabs(got - want),
                      1e-6f * std::fabs(want) + 1.2e-7f * std::fabs(gate * up))
                << (gelu ? "gelu" : "silu") << " at " << r << "," << i << " gate " << gate;
          }
        }
      }
    }
    const auto y = activation_inputs(n, 11);
    auto expected = y;
    kernels::ref::RefBackend().softcap(expected.data(), 30.0f, n);
    DeviceBuffer y_dev(gpu(), y);
    gpu().softcap(y_dev.get<float>(), 30.0f, n);
    expect_close(y_dev.read<float>(n), expected, 1e-6f, 1e-37f);
  }
}

TEST_F(CudaBackendTest, MoeRouteMatchesTheReference) {
  for (int n_expert : {4, 128, 512}) {
    for (int k : {1, 2, 4}) {
      for (bool scaled : {false, true}) {
        constexpr int kTokens = 200;
        auto logits = random_floats(static_cast<size_t>(kTokens) * n_expert, 21);
        // Ties: token 0's experts all equal; token 1's best two equal.
        std::fill(logits.begin(), logits.begin() + n_expert, 0.5f);
        logits[n_expert + 1] = logits[n_expert + 2] = 9.0f;
        const auto scale = random_floats(n_expert, 22);
        std::vector<int32_t> ref_ids(kTokens * k);
        std::vector<float> ref_w(kTokens * k);
        kernels::ref::moe_route(logits.data(), kTokens, n_expert, k,
                                scaled ? scale.data() : nullptr, ref_ids.data(), ref_w.data());
        DeviceBuffer logits_dev(gpu(), logits), scale_dev(gpu(), scale);
        DeviceBuffer ids_dev(gpu(), std::vector<int32_t>(ref_ids.size(), -1));
        DeviceBuffer w_dev(gpu(), std::vector<float>(ref_w.size(), NAN));
        gpu().moe_route(logits_dev.get<float>(), kTokens, n_expert, k,
                        scaled ? scale_dev.get<float>() : nullptr, ids_dev.get<int32_t>(),
                        w_dev.get<float>());
        EXPECT_EQ(ids_dev.read<int32_t>(ref_ids.size()), ref_ids)
            << n_expert << " experts, top " << k;
        // The same double arithmetic in the same order; CUDA's double exp may differ from glibc's
        // in the last bit of a double, which can move the f32 weight by one ulp.
        expect_close(w_dev.read<float>(ref_w.size()), ref_w, 2.4e-7f);
      }
    }
  }
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
