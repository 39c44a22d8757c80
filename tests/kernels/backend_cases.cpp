// The table of kernel cases (backend_cases.h): the harness, then one case class per op family with
// its tolerance and why, then the rows of the table.
#include "backend_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/act_q8.h"
#include "kernels/cpu/dot.h"
#include "kernels/ref/ref.h"
#include "tensor/dequantize.h"
#include "tensor/quantize.h"

namespace backend_cases {

// --- The harness --------------------------------------------------------------------------------

void* Rig::allocate(size_t bytes) {
  auto buffer = kernels::Buffer::make(backend_, bytes);
  if (!buffer.ok()) throw SetupError(buffer.error().message());
  buffers_.push_back(std::move(buffer).value());
  return buffers_.back().get();
}

void Rig::upload(void* dst, const void* src, size_t bytes) {
  if (auto s = backend_.upload(dst, src, bytes); !s.ok()) throw SetupError(s.error().message());
}

void Rig::download(void* dst, const void* src, size_t bytes) {
  if (auto s = backend_.download(dst, src, bytes); !s.ok()) throw SetupError(s.error().message());
}

namespace {

template <class T>
std::string first_difference(const std::string& what,
                             const std::map<std::string, std::vector<T>>& a,
                             const std::map<std::string, std::vector<T>>& b) {
  for (const auto& [name, values] : a) {
    const auto it = b.find(name);
    if (it == b.end()) return what + " " + name + " only on one side";
    if (values.size() != it->second.size()) return what + " " + name + ": sizes differ";
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::memcmp(&values[i], &it->second[i], sizeof(T)) != 0)
        return fmt::format("{} {} differs at {}", what, name, i);
    }
  }
  if (a.size() != b.size()) return what + ": different outputs";
  return {};
}

}  // namespace

std::string difference(const Outputs& a, const Outputs& b) {
  std::string d = first_difference("f32", a.f32, b.f32);
  if (d.empty()) d = first_difference("i32", a.i32, b.i32);
  if (d.empty()) d = first_difference("bytes", a.bytes, b.bytes);
  return d;
}

ActivationRounding cpu_activation_rounding(DType type, kernels::cpu::Isa isa) {
  const kernels::cpu::DotKernel k = kernels::cpu::dot_kernel(type, isa);
  if (k.dot == nullptr || k.partner == DType::kF32) return {};  // f32 (or dequantized rows)
  return {ActivationRounding::Kind::kBlocks, static_cast<int>(tensor::block_values(k.partner))};
}

bool run_case(const OpCase& c, kernels::Backend& backend, bool q8, Outputs& out) {
  try {
    Rig rig(backend);
    out = c.run(rig, q8);
  } catch (const SetupError& e) {
    ADD_FAILURE() << c.name() << " on " << backend.name() << ": " << e.what();
    (void)backend.synchronize();  // the error is reported; the next case starts clean
    return false;
  }
  // Errors an op or the release of the case's memory recorded after the last read.
  if (auto s = backend.synchronize(); !s.ok()) {
    ADD_FAILURE() << c.name() << " on " << backend.name() << ": " << s.error().message();
    return false;
  }
  return true;
}

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// What an 8-bit destination holds before the op: a backend that does not quantize activations
// must leave it so (ops.h), one that does must overwrite every byte a row uses.
constexpr uint8_t kPoisonByte = 0xA5;

// --- Comparisons: each reports the first value outside and stops, so one bug is one line.

template <class T>
const std::vector<T>& output(const std::map<std::string, std::vector<T>>& outputs,
                             const std::string& name) {
  static const std::vector<T> kNone;
  const auto it = outputs.find(name);
  if (it == outputs.end()) {
    ADD_FAILURE() << "no output " << name;
    return kNone;
  }
  return it->second;
}

// |got − want| ≤ bound(i) at every index (a NaN never is).
template <class Bound>
void expect_near(const std::vector<float>& got, const std::vector<float>& want, Bound bound,
                 const std::string& what) {
  if (got.size() != want.size()) {
    ADD_FAILURE() << what << ": " << got.size() << " values, the reference " << want.size();
    return;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double allowed = bound(i);
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(diff <= allowed)) {
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs reference " << want[i]
                    << " (|difference| " << diff << " > " << allowed << ")";
      return;
    }
  }
}

// The same bits (NaN included).
template <class T>
void expect_same(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  if (got.size() != want.size()) {
    ADD_FAILURE() << what << ": " << got.size() << " values, the reference " << want.size();
    return;
  }
  if (std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0) return;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      ADD_FAILURE() << what << " at " << i << " of " << got.size() << ": " << +got[i]
                    << " vs reference " << +want[i];
      return;
    }
  }
}

void expect_same_outputs(const Outputs& got, const Outputs& want) {
  for (const auto& [name, values] : want.f32) expect_same(output(got.f32, name), values, name);
  for (const auto& [name, values] : want.i32) expect_same(output(got.i32, name), values, name);
  for (const auto& [name, values] : want.bytes) expect_same(output(got.bytes, name), values, name);
}

// The 8-bit form of rows [n_rows][n_cols] (act_q8.h), padding zeroed.
std::vector<uint8_t> act_q8_of(const float* rows, int64_t n_cols, int n_rows) {
  std::vector<uint8_t> q8(kernels::act_q8_row_bytes(n_cols) * n_rows, 0);
  kernels::quantize_act_rows(rows, n_cols, n_rows, q8.data());
  return q8;
}

// The values the 8-bit form of rows [n_rows][n_cols] holds: d·q per block.
std::vector<float> act_q8_values(const std::vector<float>& rows, int64_t n_cols, int n_rows) {
  const std::vector<uint8_t> q8 = act_q8_of(rows.data(), n_cols, n_rows);
  std::vector<float> values(rows.size());
  for (int r = 0; r < n_rows; ++r) {
    const int8_t* q = kernels::act_q8_quants(q8.data(), n_cols, r);
    const float* scales = kernels::act_q8_scales(q8.data(), n_cols, r);
    for (int64_t i = 0; i < n_cols; ++i)
      values[r * n_cols + i] = scales[2 * (i / kernels::kActBlock)] * static_cast<float>(q[i]);
  }
  return values;
}

// A producer's 8-bit destination: on a backend that quantizes activations, the bytes
// quantize_act_rows gives for the f32 rows that backend wrote itself (exact: the rounding has one
// definition); on the others untouched. The padding after a row's scales is free.
void expect_q8_form(const Target& target, const std::vector<uint8_t>& q8,
                    const std::vector<float>& rows, int64_t n_cols, int n_rows,
                    const std::string& what) {
  if (!target.backend->quantizes_activations()) {
    const auto it = std::find_if(q8.begin(), q8.end(), [](uint8_t b) { return b != kPoisonByte; });
    if (it != q8.end()) {
      ADD_FAILURE() << what << ": a backend that does not quantize activations wrote byte "
                    << (it - q8.begin()) << " of its 8-bit destination";
    }
    return;
  }
  const std::vector<uint8_t> want = act_q8_of(rows.data(), n_cols, n_rows);
  const size_t row = kernels::act_q8_row_bytes(n_cols);
  const size_t used = static_cast<size_t>(n_cols) + static_cast<size_t>(n_cols / 32) * 8;
  if (q8.size() != want.size()) {
    ADD_FAILURE() << what << ": " << q8.size() << " bytes read back, " << want.size()
                  << " expected";
    return;
  }
  for (int r = 0; r < n_rows; ++r) {
    for (size_t i = 0; i < used; ++i) {
      if (q8[r * row + i] != want[r * row + i]) {
        ADD_FAILURE() << what << ": row " << r << " byte " << i << " ("
                      << (i < static_cast<size_t>(n_cols) ? "a quant" : "a scale") << ") is "
                      << +q8[r * row + i] << ", quantize_act_rows of the backend's own f32 output "
                      << "gives " << +want[r * row + i];
        return;
      }
    }
  }
}

// --- Tolerances shared by several families ------------------------------------------------------

// Bound on |backend − reference| for one product Σ_c w_c·x_c, the reference summing in double:
// - f32 sums in any order: 1e-5 of Σ|w_c·x_c| (cpu_matmul_test.cpp's bound; an f32 sum of 8192
//   terms drifts far less), and 1e-6 absolute;
// - a backend's own 8-bit blocks of B values: each x_c is off by at most half a step, d/2 =
//   amax(block of c)/254, so the sum moves by at most Σ_c |w_c|·amax(block of c)/254; 1 % more
//   for the CPU's Q8_1, whose block sum is an f16 (cpu_matmul_test.cpp checks those kernels
//   against the exact product of what they read);
// - the 8-bit activations it was given, xq (act_q8.h): the exact shift they make,
//   |Σ_c w_c·(xq_c − x_c)|, plus the f32 sums, 1e-5 of Σ|w_c·xq_c|. Exact rather than worst-case,
//   so a wrong block scale or quant does not hide inside the rounding allowance (a backend that
//   reads the f32 rows instead stays within it too).
double product_bound(const float* w, const float* x, const float* xq, int64_t n,
                     ActivationRounding rounding) {
  double magnitude = 0;
  for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(static_cast<double>(w[i]) * x[i]);
  switch (rounding.kind) {
    case ActivationRounding::Kind::kF32:
      return 1e-5 * magnitude + 1e-6;
    case ActivationRounding::Kind::kBlocks: {
      double worst = 0;
      for (int64_t b = 0; b < n; b += rounding.block) {
        const int64_t end = std::min(n, b + rounding.block);
        float amax = 0;
        for (int64_t i = b; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
        for (int64_t i = b; i < end; ++i)
          worst += std::fabs(static_cast<double>(w[i])) * amax / 254.0;
      }
      return 1.01 * worst + 1e-5 * magnitude + 1e-6;
    }
    case ActivationRounding::Kind::kGiven8Bit: {
      double shift = 0, magnitude_q = 0;
      for (int64_t i = 0; i < n; ++i) {
        shift += static_cast<double>(w[i]) * (static_cast<double>(xq[i]) - x[i]);
        magnitude_q += std::fabs(static_cast<double>(w[i]) * xq[i]);
      }
      return std::fabs(shift) + 1e-5 * std::max(magnitude, magnitude_q) + 1e-6;
    }
  }
  return 0;
}

// The reference's value of one product (ref::matmul: dequantized row, double sum, one rounding).
float reference_product(const float* w, const float* x, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(w[i]) * x[i];
  return static_cast<float>(acc);
}

// A norm's output differs from the reference's by at most 2 ulp of its 1/rms factor, the double
// sum of squares being added in another order: 2.5e-7 of each value.
constexpr double kNormRelative = 2.5e-7;

// gelu_mul/silu_mul: expf/tanhf (or a polynomial exp on AVX2) within 1e-6 relative, plus the
// reference's own loss in 1 + tanh(z) where tanh(z) → −1: 1.2e-7·|gate·up| (0.5·|gate|·2⁻²³·|up|,
// twice over) — the CPU tests' bound.
double glu_bound(float want, float gate, float up) {
  return 1e-6 * std::fabs(want) + 1.2e-7 * std::fabs(static_cast<double>(gate) * up);
}

// The steepest |act'(g)| of gelu (1.129 at g ≈ 1.5) and silu (1.100 at g ≈ 2.4).
constexpr double kGluSlope = 1.13;

// act(g)·u with g off by up to tg and u by up to tu from the reference's products:
// |act(g')u' − act(g)u| ≤ slope·tg·(|u| + tu) + |act(g)|·tu, plus the activation's own rounding.
double gated_bound(kernels::GluActivation act, float g, float u, double tg, double tu, float want) {
  const float a =
      act == kernels::GluActivation::kGelu ? kernels::ref::gelu(g) : kernels::ref::silu(g);
  return kGluSlope * tg * (std::fabs(u) + tu) + std::fabs(a) * tu + glu_bound(want, g, u);
}

// moe_route's weights: the reference's double arithmetic in its order; with the host's libm the
// same bits, else CUDA's double exp may differ in a double's last bit, which can move an f32 weight
// by one ulp (2.4e-7 relative).
void expect_route_weights(const Target& target, const std::vector<float>& got,
                          const std::vector<float>& want, const std::string& what) {
  if (target.host_libm) return expect_same(got, want, what);
  expect_near(
      got, want, [&](size_t i) { return 2.4e-7 * std::fabs(want[i]); }, what);
}

// --- Inputs -------------------------------------------------------------------------------------

// A weight matrix: random normal rows quantized by tensor::quantize_row (every type it decodes),
// and the values the stored rows hold (tensor::dequantize_row), for the tolerances.
struct Weights {
  DType type = DType::kF32;
  int64_t n_rows = 0, n_cols = 0;
  size_t row_bytes = 0;
  std::vector<uint8_t> bytes;
  std::vector<float> values;

  const float* row(int64_t r) const { return values.data() + r * n_cols; }
  kernels::Matrix at(const void* data) const { return {data, type, n_cols, n_rows, row_bytes}; }
  kernels::Matrix placed(Rig& rig) const { return at(rig.put(bytes)); }
};

Weights make_weights(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  Weights w{type, rows, cols, static_cast<size_t>(tensor::row_bytes(type, cols)), {}, {}};
  w.bytes.resize(w.row_bytes * rows);
  const auto values = random_floats(static_cast<size_t>(rows * cols), seed, 0.5f);
  for (int64_t r = 0; r < rows; ++r) {
    const auto s = tensor::quantize_row(type, values.data() + r * cols,
                                        w.bytes.data() + r * w.row_bytes, cols);
    if (!s.ok()) throw SetupError(s.error().message());
  }
  if (type == DType::kNVFP4) {  // UE4M3 scales: a subnormal and a zero one in the first block
    w.bytes[0] = 0x05;
    w.bytes[1] = 0x00;
  }
  w.values.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const auto s = tensor::dequantize_row(type, w.bytes.data() + r * w.row_bytes,
                                          w.values.data() + r * cols, cols);
    if (!s.ok()) throw SetupError(s.error().message());
  }
  return w;
}

// Values for the activation functions: normal ones and the extremes where exp saturates.
std::vector<float> activation_inputs(int64_t n, uint32_t seed) {
  auto v = random_floats(static_cast<size_t>(n), seed, 4.0f);
  const float extremes[] = {0.0f,   -0.0f, 1e-30f, -1e-30f, 20.0f,
                            -20.0f, 90.0f, -90.0f, 1e4f,    -1e4f};
  for (size_t i = 0; i < std::size(extremes) && i < v.size(); ++i)
    v[v.size() - 1 - i] = extremes[i];
  return v;
}

std::vector<float> rope_frequencies(int n_rot, float base) {
  std::vector<float> f(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i) f[i] = std::pow(base, -2.0f * i / n_rot);
  return f;
}

}  // namespace

PagedCache::PagedCache(DType kt, DType vt, int heads, int dim, int cells, uint32_t seed)
    : k_type(kt), v_type(vt), n_head_kv(heads), head_dim(dim), n_cells(cells) {
  const int kv_dim = heads * dim;
  k_row = static_cast<size_t>(tensor::row_bytes(kt, kv_dim));
  v_row = static_cast<size_t>(tensor::row_bytes(vt, kv_dim));
  k_rows.resize(k_row * cells);
  v_rows.resize(v_row * cells);
  const auto k = random_floats(static_cast<size_t>(cells) * kv_dim, seed);
  const auto v = random_floats(static_cast<size_t>(cells) * kv_dim, seed + 1);
  for (int c = 0; c < cells; ++c) {
    if (!tensor::quantize_row(kt, k.data() + c * kv_dim, k_rows.data() + c * k_row, kv_dim).ok() ||
        !tensor::quantize_row(vt, v.data() + c * kv_dim, v_rows.data() + c * v_row, kv_dim).ok())
      throw SetupError("a cache row does not quantize");
    pos.push_back(c % 7 == 6 ? -1 : (c + 5) % cells);
  }
}

const kernels::KvSpan* PagedCache::place(Rig& rig) const {
  std::vector<const uint8_t*> k_blocks, v_blocks;
  for (int first = 0; first < n_cells; first += kCellsPerBlock) {
    const int rows = std::min(kCellsPerBlock, n_cells - first);
    // A whole block: cells past the last one are never read, and hold a byte pattern.
    std::vector<uint8_t> k(k_row * kCellsPerBlock, 0xEE), v(v_row * kCellsPerBlock, 0xEE);
    std::memcpy(k.data(), k_rows.data() + first * k_row, rows * k_row);
    std::memcpy(v.data(), v_rows.data() + first * v_row, rows * v_row);
    k_blocks.push_back(rig.put(k));
    v_blocks.push_back(rig.put(v));
  }
  kernels::KvSpan span{k_type,  v_type,  n_head_kv, head_dim, n_cells, kCellsPerBlock,
                       nullptr, nullptr, k_row,     v_row,    nullptr};
  span.k_blocks = rig.put(k_blocks);
  span.v_blocks = rig.put(v_blocks);
  span.cell_pos = rig.put(pos);
  return rig.put(std::vector<kernels::KvSpan>{span});
}

namespace {

// Destinations of T new K/V rows, as kv::Cache gives them: rows in reverse token order (not one
// contiguous run), V rows starting 16-byte aligned after the K rows (a destination must be aligned
// to its type; tensor::quantize_row refuses others).
struct KvRows {
  size_t k_row, v_row, v_start, total;
  int n_tokens;
  KvRows(DType kt, DType vt, int kv_dim, int n)
      : k_row(static_cast<size_t>(tensor::row_bytes(kt, kv_dim))),
        v_row(static_cast<size_t>(tensor::row_bytes(vt, kv_dim))),
        v_start((n * k_row + 15) / 16 * 16),
        total(v_start + n * v_row),
        n_tokens(n) {}
  std::vector<kernels::KvWrite> at(uint8_t* base) const {
    std::vector<kernels::KvWrite> dst(n_tokens);
    for (int t = 0; t < n_tokens; ++t)
      dst[t] = {base + (n_tokens - 1 - t) * k_row, base + v_start + (n_tokens - 1 - t) * v_row};
    return dst;
  }
  // The bytes ref::store_kv writes for these rows over a region of 0xAB.
  std::vector<uint8_t> reference(DType kt, DType vt, int kv_dim, const float* k,
                                 const float* v) const {
    std::vector<uint8_t> bytes(total, 0xAB);
    kernels::ref::store_kv(kt, vt, kv_dim, k, v, at(bytes.data()).data(), n_tokens);
    return bytes;
  }
};

std::string tokens_key(int n_tokens) {
  return fmt::format("y (T={})", n_tokens);
}

// product_bound of every output of w·x over the rows of x (xq: the values of their 8-bit form, or
// empty), computed once per rounding: a case's check runs once per backend, and the table's
// self-test (backend_cases_test.cpp) runs it many times.
class ProductBounds {
 public:
  ProductBounds(const Weights& w, const std::vector<float>& x, const std::vector<float>& xq)
      : w_(w), x_(x), xq_(xq) {}

  double at(int64_t t, int64_t r, ActivationRounding rounding) const {
    std::vector<double>& bounds = memo_[{static_cast<int>(rounding.kind), rounding.block}];
    if (bounds.empty()) {
      const int64_t n = w_.n_cols, tokens = static_cast<int64_t>(x_.size()) / n;
      bounds.resize(static_cast<size_t>(tokens * w_.n_rows));
      for (int64_t tt = 0; tt < tokens; ++tt) {
        for (int64_t rr = 0; rr < w_.n_rows; ++rr) {
          bounds[tt * w_.n_rows + rr] =
              product_bound(w_.row(rr), x_.data() + tt * n,
                            xq_.empty() ? nullptr : xq_.data() + tt * n, n, rounding);
        }
      }
    }
    return bounds[t * w_.n_rows + r];
  }

 private:
  const Weights& w_;
  const std::vector<float>& x_;
  const std::vector<float>& xq_;
  mutable std::map<std::pair<int, int>, std::vector<double>> memo_;
};

// Every value of a [T][rows] product y = w·x within its bound.
void expect_products(const std::vector<float>& got, const std::vector<float>& want,
                     const ProductBounds& bounds, int64_t rows, ActivationRounding rounding,
                     const std::string& what) {
  expect_near(
      got, want,
      [&](size_t i) {
        return bounds.at(static_cast<int64_t>(i) / rows, static_cast<int64_t>(i) % rows, rounding);
      },
      what);
}

// --- matmul: every type, decode (T ≤ 8) and prefill batches, awkward row counts ----------------

class MatmulCase final : public OpCase {
 public:
  MatmulCase(DType type, int64_t cols, int64_t rows)
      : OpCase("matmul", fmt::format("{} {} rows of {}", tensor::dtype_name(type), rows, cols)),
        w_(make_weights(type, rows, cols, static_cast<uint32_t>(cols * 31 + rows))),
        x_(random_floats(static_cast<size_t>(token_counts().back() * cols),
                         static_cast<uint32_t>(cols + 7))),
        bounds_(w_, x_, no_q8_) {}

  // Decode batches and prefill ones; 67 tokens (beyond a CPU's 64-row batch, and a partial tile
  // of a device's) only for rows short enough that the reference stays quick.
  std::vector<int> token_counts() const {
    if (w_.n_cols > 1024) return {1, 3, 8, 17};
    return {1, 3, 8, 17, 67};
  }

  Outputs run(Rig& rig, bool) const override {
    const kernels::Matrix w = w_.placed(rig);
    const float* x = rig.put(x_);
    Outputs out;
    for (int T : token_counts()) {
      float* y = rig.filled(static_cast<size_t>(T * w_.n_rows), kNaN);
      rig.backend().matmul(w, x, y, T);
      out.f32[tokens_key(T)] = rig.read(y, static_cast<size_t>(T * w_.n_rows));
    }
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target& target, bool) const override {
    for (int T : token_counts()) {
      const std::string key = tokens_key(T);
      expect_products(output(got.f32, key), output(want.f32, key), bounds_, w_.n_rows,
                      target.activation_rounding(w_.type, T, false), key);
    }
  }

 private:
  Weights w_;
  std::vector<float> x_, no_q8_;
  ProductBounds bounds_;
};

// --- get_rows: exact (the reference's decode, and its scaling in f32) --------------------------

class GetRowsCase final : public OpCase {
 public:
  GetRowsCase(DType type, int64_t cols)
      : OpCase("get_rows", fmt::format("{} rows of {}", tensor::dtype_name(type), cols)),
        table_(make_weights(type, 50, cols, 8)) {}

  Outputs run(Rig& rig, bool) const override {
    const kernels::Matrix table = table_.placed(rig);
    Outputs out;
    for (int n : {1, 3, 200}) {
      std::vector<int32_t> ids(n);
      for (int i = 0; i < n; ++i) ids[i] = (i * 31 + 7) % 50;
      const int32_t* ids_dev = rig.put(ids);
      for (float scale : {1.0f, 3.5f}) {
        float* o = rig.filled(static_cast<size_t>(n * table_.n_cols), kNaN);
        rig.backend().get_rows(table, ids_dev, n, scale, o);
        out.f32[fmt::format("{} rows scaled by {}", n, scale)] =
            rig.read(o, static_cast<size_t>(n * table_.n_cols));
      }
    }
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target&, bool) const override {
    expect_same_outputs(got, want);
  }

 private:
  Weights table_;
};

// --- rmsnorm: within kNormRelative, out of place and in place ----------------------------------

class RmsnormCase final : public OpCase {
 public:
  RmsnormCase(int64_t n, int64_t rows, bool weighted)
      : OpCase("rmsnorm", fmt::format("{} rows of {}{}", rows, n, weighted ? ", weighted" : "")),
        n_(n),
        rows_(rows),
        x_(random_floats(static_cast<size_t>(n * rows), static_cast<uint32_t>(n), 3.0f)),
        w_(weighted ? random_floats(static_cast<size_t>(n), 3) : std::vector<float>{}) {}

  Outputs run(Rig& rig, bool) const override {
    const size_t total = x_.size();
    const float* w = w_.empty() ? nullptr : rig.put(w_);
    float* x = rig.put(x_);
    float* y = rig.filled(total, kNaN);
    rig.backend().rmsnorm(x, w, y, n_, rows_, 1e-6f);
    Outputs out;
    out.f32["y"] = rig.read(y, total);
    rig.backend().rmsnorm(x, w, x, n_, rows_, 1e-6f);  // in place, as the models call it
    out.f32["in place"] = rig.read(x, total);
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target&, bool) const override {
    for (const char* key : {"y", "in place"}) {
      const auto& w = output(want.f32, key);
      expect_near(
          output(got.f32, key), w, [&](size_t i) { return kNormRelative * std::fabs(w[i]); }, key);
    }
  }

 private:
  int64_t n_, rows_;
  std::vector<float> x_, w_;
};

// --- rope: exact (the angles in double, the rotation in the reference's f32 operations) ---------

class RopeCase final : public OpCase {
 public:
  RopeCase(kernels::RopeStyle style, int n_tokens, int n_head, int head_dim, int n_rot, float base)
      : OpCase("rope",
               fmt::format("{} T={} {} heads of {}, {} rotated",
                           style == kernels::RopeStyle::kAdjacent ? "adjacent" : "rotate-half",
                           n_tokens, n_head, head_dim, n_rot)),
        style_(style),
        n_tokens_(n_tokens),
        n_head_(n_head),
        head_dim_(head_dim),
        n_rot_(n_rot),
        freq_(rope_frequencies(n_rot, base)),
        x_(random_floats(static_cast<size_t>(n_tokens) * n_head * head_dim, 5)) {
    for (int t = 0; t < n_tokens; ++t) pos_.push_back((t * 37) % 5000);
  }

  Outputs run(Rig& rig, bool) const override {
    float* x = rig.put(x_);
    rig.backend().rope(x, n_tokens_, n_head_, head_dim_, rig.put(pos_),
                       {style_, n_rot_, rig.put(freq_)});
    Outputs out;
    out.f32["x"] = rig.read(x, x_.size());
    return out;
  }
  // Angles in double; CUDA's double cos/sin (≤ 2 ulp of a double) round to the same float as
  // glibc's but for inputs within 2⁻⁵² of a float rounding boundary: exact.
  void check(const Outputs& got, const Outputs& want, const Target&, bool) const override {
    expect_same_outputs(got, want);
  }

 private:
  kernels::RopeStyle style_;
  int n_tokens_, n_head_, head_dim_, n_rot_;
  std::vector<float> freq_, x_;
  std::vector<int32_t> pos_;
};

// --- The elementwise ops: exact, softcap within 1e-6 ---------------------------------------------

class ElementwiseCase final : public OpCase {
 public:
  explicit ElementwiseCase(int64_t n)
      : OpCase("elementwise", fmt::format("n={}", n)),
        n_(n),
        y_(activation_inputs(n, 1)),
        x_(random_floats(static_cast<size_t>(n), 2)) {}

  Outputs run(Rig& rig, bool) const override {
    kernels::Backend& b = rig.backend();
    const float* x = rig.put(x_);
    Outputs out;
    auto op = [&](const char* name, auto&& call) {
      float* y = rig.put(y_);
      call(y);
      out.f32[name] = rig.read(y, y_.size());
    };
    op("add", [&](float* y) { b.add(y, x, n_); });
    op("mul", [&](float* y) { b.mul(y, x, n_); });
    op("scale", [&](float* y) { b.scale(y, -0.37f, n_); });
    op("copy", [&](float* y) { b.copy(y, x, n_); });
    op("clamp", [&](float* y) { b.clamp(y, -0.5f, 0.8f, n_); });
    op("softcap", [&](float* y) { b.softcap(y, 30.0f, n_); });
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target&, bool) const override {
    for (const char* exact : {"add", "mul", "scale", "copy", "clamp"})
      expect_same(output(got.f32, exact), output(want.f32, exact), exact);
    // cap·tanh(y/cap) with tanhf or a polynomial tanh: 1e-6 relative (and subnormals).
    const auto& w = output(want.f32, "softcap");
    expect_near(
        output(got.f32, "softcap"), w, [&](size_t i) { return 1e-6 * std::fabs(w[i]) + 1e-37; },
        "softcap");
  }

 private:
  int64_t n_;
  std::vector<float> y_, x_;
};

// --- copy_rows: exact, between strides and overlapping (memmove per row, rows in order) ----------

class CopyRowsCase final : public OpCase {
 public:
  explicit CopyRowsCase(int64_t rows)
      : OpCase("copy_rows", fmt::format("{} rows", rows)),
        rows_(rows),
        x_(random_floats(static_cast<size_t>(rows * kXs), 3)),
        y_(random_floats(static_cast<size_t>(rows * kYs), 4)) {}

  Outputs run(Rig& rig, bool) const override {
    Outputs out;
    float* y = rig.put(y_);
    rig.backend().copy_rows(y, kYs, rig.put(x_), kXs, kN, rows_);
    out.f32["between strides"] = rig.read(y, y_.size());
    for (int shift : {5, -5}) {
      float* o = rig.put(y_);
      const int64_t to = shift > 0 ? shift : 0, from = shift > 0 ? 0 : -shift;
      rig.backend().copy_rows(o + to, kYs, o + from, kYs, kN, rows_);
      out.f32[fmt::format("overlapping by {}", shift)] = rig.read(o, y_.size());
    }
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target&, bool) const override {
    expect_same_outputs(got, want);
  }

 private:
  static constexpr int64_t kN = 70, kXs = 101, kYs = 83;
  int64_t rows_;
  std::vector<float> x_, y_;
};

// --- silu_mul / gelu_mul: within glu_bound
// ---------------------------------------------------------

class GluActivationCase final : public OpCase {
 public:
  GluActivationCase(kernels::GluActivation act, int64_t n, int64_t rows)
      : OpCase("glu_activations",
               fmt::format("{} {} rows of {}",
                           act == kernels::GluActivation::kGelu ? "gelu" : "silu", rows, n)),
        act_(act),
        n_(n),
        rows_(rows),
        gate_up_(activation_inputs(2 * n * rows, static_cast<uint32_t>(n))) {}

  Outputs run(Rig& rig, bool) const override {
    Outputs out;
    // A fused gate_up buffer: row r's gate at r·2n, its up half n further.
    const float* gu = rig.put(gate_up_);
    float* o = rig.filled(static_cast<size_t>(n_ * rows_), kNaN);
    call(rig.backend(), gu, gu + n_, o, 2 * n_);
    out.f32["from gate_up"] = rig.read(o, static_cast<size_t>(n_ * rows_));
    // In place over packed gate rows with the up rows elsewhere (as matmul_glu's default calls it).
    float* gate = rig.put(packed(0));
    call(rig.backend(), gate, rig.put(packed(n_)), gate, n_);
    out.f32["in place"] = rig.read(gate, static_cast<size_t>(n_ * rows_));
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target&, bool) const override {
    const auto gate = packed(0), up = packed(n_);
    for (const char* key : {"from gate_up", "in place"}) {
      const auto& w = output(want.f32, key);
      expect_near(
          output(got.f32, key), w, [&](size_t i) { return glu_bound(w[i], gate[i], up[i]); }, key);
    }
  }

 private:
  void call(kernels::Backend& b, const float* g, const float* u, float* o, int64_t stride) const {
    if (act_ == kernels::GluActivation::kGelu)
      b.gelu_mul(g, u, o, n_, rows_, stride);
    else
      b.silu_mul(g, u, o, n_, rows_, stride);
  }
  // The gate (offset 0) or up (offset n) halves of gate_up_, packed [rows][n].
  std::vector<float> packed(int64_t offset) const {
    std::vector<float> v(static_cast<size_t>(n_ * rows_));
    for (int64_t r = 0; r < rows_; ++r)
      std::copy_n(gate_up_.begin() + r * 2 * n_ + offset, n_, v.begin() + r * n_);
    return v;
  }

  kernels::GluActivation act_;
  int64_t n_, rows_;
  std::vector<float> gate_up_;
};

// --- moe_route: ids exact, weights per expect_route_weights
// ---------------------------------------

class MoeRouteCase final : public OpCase {
 public:
  static constexpr int kTokens = 200;

  MoeRouteCase(int n_expert, int k, bool scaled)
      : OpCase("moe_route",
               fmt::format("top {} of {} experts{}", k, n_expert, scaled ? ", scaled" : "")),
        n_expert_(n_expert),
        k_(k),
        logits_(random_floats(static_cast<size_t>(kTokens) * n_expert, 21)),
        scale_(scaled ? random_floats(n_expert, 22) : std::vector<float>{}) {
    // Ties: token 0's experts all equal; token 1's best two equal (the lower id first).
    std::fill(logits_.begin(), logits_.begin() + n_expert, 0.5f);
    logits_[n_expert + 1] = logits_[n_expert + 2] = 9.0f;
  }

  Outputs run(Rig& rig, bool) const override {
    const size_t n = static_cast<size_t>(kTokens) * k_;
    int32_t* ids = rig.filled<int32_t>(n, -1);
    float* weights = rig.filled(n, kNaN);
    rig.backend().moe_route(rig.put(logits_), kTokens, n_expert_, k_,
                            scale_.empty() ? nullptr : rig.put(scale_), ids, weights);
    Outputs out;
    out.i32["ids"] = rig.read(ids, n);
    out.f32["weights"] = rig.read(weights, n);
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target& target, bool) const override {
    expect_same(output(got.i32, "ids"), output(want.i32, "ids"), "ids");
    expect_route_weights(target, output(got.f32, "weights"), output(want.f32, "weights"),
                         "weights");
  }

 private:
  int n_expert_, k_;
  std::vector<float> logits_, scale_;
};

// --- store_kv: the reference's bytes -----------------------------------------------------------

class StoreKvCase final : public OpCase {
 public:
  static constexpr int kKvDim = 96;

  StoreKvCase(DType k_type, DType v_type, int n)
      : OpCase("store_kv", fmt::format("K {} V {} T={}", tensor::dtype_name(k_type),
                                       tensor::dtype_name(v_type), n)),
        k_type_(k_type),
        v_type_(v_type),
        rows_(k_type, v_type, kKvDim, n),
        k_(random_floats(static_cast<size_t>(n) * kKvDim, 12, 2.0f)),
        v_(random_floats(static_cast<size_t>(n) * kKvDim, 13)) {
    k_[0] = 3e-6f;                  // an f16 subnormal
    k_[1] = 7e4f;                   // beyond f16: inf
    k_[2] = 1.0f + 1.0f / 2048.0f;  // an f16 rounding tie
  }

  Outputs run(Rig& rig, bool) const override {
    uint8_t* cache = rig.filled<uint8_t>(rows_.total, 0xAB);
    rig.backend().store_kv(k_type_, v_type_, kKvDim, rig.put(k_), rig.put(v_),
                           rig.put(rows_.at(cache)), rows_.n_tokens);
    Outputs out;
    out.bytes["cache"] = rig.read(cache, rows_.total);
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target&, bool) const override {
    expect_same_outputs(got, want);
  }

 private:
  DType k_type_, v_type_;
  KvRows rows_;
  std::vector<float> k_, v_;
};

// --- attention over paged caches ---------------------------------------------------------------

struct AttentionSpec {
  std::string name;
  int head_dim = 64, n_head = 8, n_head_kv = 2;
  DType k_type = DType::kF16, v_type = DType::kF16;
  int window = 0;
  std::vector<int> sequences = {37, 300};  // cells of each sequence's cache
  struct Query {
    int sequence;
    int32_t pos;
    int32_t from = -1, until = -1;  // the image it sees both ways, [from, until]; −1: none
  };
  std::vector<Query> queries = {{0, 3}, {1, 250}, {0, 36}};
  bool partials = true;          // give a decode batch the split's working memory
  bool nothing_visible = false;  // every cell after every query: the output is exactly 0
};

// Attention tolerance: the reference sums in double over two passes; a kernel in f32 with an online
// softmax (and a polynomial exp on AVX2, ≤ 2e-7 relative), a device over chunks it then combines.
// Outputs are weighted means of N(0, 1) values; the worst error the CPU tests measured is ~3e-6.
constexpr double kAttentionTolerance = 2e-5;

class AttentionCase final : public OpCase {
 public:
  explicit AttentionCase(AttentionSpec spec) : OpCase("attention", spec.name), s_(std::move(spec)) {
    for (size_t i = 0; i < s_.sequences.size(); ++i) {
      caches_.emplace_back(s_.k_type, s_.v_type, s_.n_head_kv, s_.head_dim, s_.sequences[i],
                           static_cast<uint32_t>(s_.head_dim + 7 * i));
      if (s_.nothing_visible) std::fill(caches_.back().pos.begin(), caches_.back().pos.end(), 5000);
    }
    q_ = random_floats(static_cast<size_t>(n_tokens()) * width(), 99);
  }

  int n_tokens() const { return static_cast<int>(s_.queries.size()); }
  int64_t width() const { return static_cast<int64_t>(s_.n_head) * s_.head_dim; }
  bool has_q8() const override {
    return n_tokens() <= kernels::kActQ8MaxTokens && kernels::act_q8_fits(width());
  }

  Outputs run(Rig& rig, bool q8) const override {
    const int T = n_tokens();
    std::vector<const kernels::KvSpan*> placed, spans;
    for (const PagedCache& c : caches_) placed.push_back(c.place(rig));
    std::vector<int32_t> pos, from, until;
    bool sees_ahead = false;
    for (const auto& q : s_.queries) {
      spans.push_back(placed[q.sequence]);
      pos.push_back(q.pos);
      from.push_back(q.until >= 0 ? q.from : q.pos);
      until.push_back(q.until >= 0 ? q.until : q.pos);
      sees_ahead |= q.until >= 0;
    }
    kernels::AttentionBatch b;
    b.n_tokens = T;
    b.n_head = s_.n_head;
    b.head_dim = s_.head_dim;
    b.q = rig.put(q_);
    b.out = rig.filled(q_.size(), kNaN);
    b.pos = rig.put(pos);
    b.kv = rig.put(spans);
    b.window = s_.window;
    b.scale = 1.0f / std::sqrt(static_cast<float>(s_.head_dim));
    b.attend_from = sees_ahead ? rig.put(from) : nullptr;
    b.attend_until = sees_ahead ? rig.put(until) : nullptr;
    if (s_.partials && T <= kernels::kActQ8MaxTokens) {
      b.partials = rig.filled(kernels::attn_partials_floats(T, s_.n_head, s_.head_dim), kNaN);
    }
    const size_t q8_bytes = kernels::act_q8_row_bytes(width()) * T;
    if (q8) b.out_q8 = rig.filled<uint8_t>(q8_bytes, kPoisonByte);
    rig.backend().attention(b);
    Outputs out;
    out.f32["out"] = rig.read(b.out, q_.size());
    if (q8) out.bytes["out_q8"] = rig.read(static_cast<const uint8_t*>(b.out_q8), q8_bytes);
    return out;
  }

  void check(const Outputs& got, const Outputs& want, const Target& target,
             bool q8) const override {
    const auto& out = output(got.f32, "out");
    if (s_.nothing_visible) {
      expect_same(out, std::vector<float>(q_.size(), 0.0f), "out (nothing visible)");
    } else {
      const auto& w = output(want.f32, "out");
      expect_near(
          out, w, [&](size_t i) { return kAttentionTolerance * (1.0 + std::fabs(w[i])); }, "out");
    }
    if (q8) expect_q8_form(target, output(got.bytes, "out_q8"), out, width(), n_tokens(), "out_q8");
  }

 private:
  AttentionSpec s_;
  std::vector<PagedCache> caches_;
  std::vector<float> q_;
};

// --- matmuls: products sharing their input (q, k, v), with 8-bit activations for decode ---------

class MatmulsCase final : public OpCase {
 public:
  MatmulsCase(std::vector<std::pair<DType, int64_t>> products, int64_t cols, int n_tokens)
      : OpCase("matmuls", describe(products, cols, n_tokens)), n_tokens_(n_tokens) {
    uint32_t seed = static_cast<uint32_t>(cols * 13 + n_tokens);
    for (const auto& [type, rows] : products) w_.push_back(make_weights(type, rows, cols, ++seed));
    x_ = random_floats(static_cast<size_t>(n_tokens * cols), ++seed);
    if (has_q8()) xq_ = act_q8_values(x_, cols, n_tokens);
    for (const Weights& w : w_) bounds_.push_back(std::make_unique<ProductBounds>(w, x_, xq_));
  }

  bool has_q8() const override {
    return n_tokens_ <= kernels::kActQ8MaxTokens && kernels::act_q8_fits(w_[0].n_cols);
  }

  Outputs run(Rig& rig, bool q8) const override {
    std::vector<kernels::MatmulOut> outs;
    for (const Weights& w : w_)
      outs.push_back({w.placed(rig), rig.filled(static_cast<size_t>(n_tokens_ * w.n_rows), kNaN)});
    const kernels::Activations x{
        rig.put(x_), q8 ? rig.put(act_q8_of(x_.data(), w_[0].n_cols, n_tokens_)) : nullptr};
    rig.backend().matmuls(outs.data(), static_cast<int>(outs.size()), x, n_tokens_);
    Outputs out;
    for (size_t i = 0; i < outs.size(); ++i) {
      out.f32[fmt::format("y{}", i)] =
          rig.read(outs[i].y, static_cast<size_t>(n_tokens_ * w_[i].n_rows));
    }
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target& target,
             bool q8) const override {
    for (size_t i = 0; i < w_.size(); ++i) {
      const std::string key = fmt::format("y{}", i);
      expect_products(output(got.f32, key), output(want.f32, key), *bounds_[i], w_[i].n_rows,
                      target.activation_rounding(w_[i].type, n_tokens_, q8), key);
    }
  }

 private:
  static std::string describe(const std::vector<std::pair<DType, int64_t>>& products, int64_t cols,
                              int n_tokens) {
    std::string s;
    for (const auto& [type, rows] : products)
      s += fmt::format("{}{}×{}", s.empty() ? "" : " + ", tensor::dtype_name(type), rows);
    return fmt::format("{} of {} T={}", s, cols, n_tokens);
  }

  int n_tokens_;
  std::vector<Weights> w_;
  std::vector<float> x_, xq_;
  std::vector<std::unique_ptr<ProductBounds>> bounds_;
};

// --- lora: y += s·B·(A·x) per adapter, within the rounding bound of the sums ------------------

struct LoraSpec {
  int64_t cols = 64, rows = 48;
  std::vector<int> ranks = {8};  // one adapter per rank
  int n_tokens = 1;
};

// Each adapter's tokens: token t uses adapter t % (adapters + 1), the last choice being none (its
// scale 0 in every term), so rows of y must also come back untouched.
class LoraCase final : public OpCase {
 public:
  explicit LoraCase(LoraSpec s)
      : OpCase("lora", fmt::format("{}x{} ranks {} T={}", s.rows, s.cols, fmt::join(s.ranks, ","),
                                   s.n_tokens)),
        s_(std::move(s)) {
    uint32_t seed = static_cast<uint32_t>(s_.cols * 7 + s_.rows + s_.n_tokens);
    const int n_adapters = static_cast<int>(s_.ranks.size());
    x_ = random_floats(static_cast<size_t>(s_.n_tokens * s_.cols), ++seed);
    y_ = random_floats(static_cast<size_t>(s_.n_tokens * s_.rows), ++seed);
    for (int i = 0; i < n_adapters; ++i) {
      const int r = s_.ranks[i];
      a_.push_back(random_floats(static_cast<size_t>(r * s_.cols), ++seed, 0.3f));
      b_.push_back(random_floats(static_cast<size_t>(s_.rows * r), ++seed, 0.3f));
      std::vector<float> scale(s_.n_tokens, 0.0f);
      for (int t = 0; t < s_.n_tokens; ++t) {
        if (t % (n_adapters + 1) == i) scale[t] = 0.5f + 0.25f * static_cast<float>(i);
      }
      scales_.push_back(std::move(scale));
    }
    // The bound per output: the f32 rounding of each sum, from the magnitudes it adds up
    // (n + 2 roundings of at most 2^-24 each, relative to the sum of absolute terms).
    bound_.assign(y_.size(), 0.0);
    for (int i = 0; i < n_adapters; ++i) {
      const int r = s_.ranks[i];
      for (int t = 0; t < s_.n_tokens; ++t) {
        const double scale = scales_[i][t];
        if (scale == 0) continue;
        std::vector<double> h_abs(r, 0.0), h_err(r, 0.0);
        for (int k = 0; k < r; ++k) {
          for (int64_t c = 0; c < s_.cols; ++c)
            h_abs[k] += std::fabs(double(a_[i][k * s_.cols + c]) * x_[t * s_.cols + c]);
          h_err[k] = h_abs[k] * (s_.cols + 2) * 0x1p-24;
        }
        for (int64_t row = 0; row < s_.rows; ++row) {
          double mag = 0, err = 0;
          for (int k = 0; k < r; ++k) {
            const double b = std::fabs(double(b_[i][row * r + k]));
            mag += b * h_abs[k];
            err += b * h_err[k];
          }
          const size_t at = static_cast<size_t>(t * s_.rows + row);
          bound_[at] += scale * (err + mag * (r + 2) * 0x1p-24) + 0x1p-23 * std::fabs(y_[at]);
        }
      }
    }
  }

  Outputs run(Rig& rig, bool) const override {
    std::vector<kernels::LoraTerm> terms;
    int max_rank = 0;
    for (size_t i = 0; i < a_.size(); ++i) {
      terms.push_back({.a = rig.put(a_[i]),
                       .b = rig.put(b_[i]),
                       .rank = s_.ranks[i],
                       .scale = rig.put(scales_[i])});
      max_rank = std::max(max_rank, s_.ranks[i]);
    }
    float* y = rig.put(y_);
    rig.backend().lora({.terms = terms.data(),
                        .n_terms = static_cast<int>(terms.size()),
                        .n_cols = s_.cols,
                        .n_rows = s_.rows,
                        .x = rig.put(x_),
                        .y = y,
                        .n_tokens = s_.n_tokens,
                        .scratch = rig.filled(static_cast<size_t>(s_.n_tokens * max_rank), kNaN)});
    Outputs out;
    out.f32["y"] = rig.read(y, y_.size());
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target&, bool) const override {
    const auto& y = output(got.f32, "y");
    expect_near(
        y, output(want.f32, "y"), [&](size_t i) { return bound_[i]; }, "y");
    // The tokens no adapter takes keep their bits.
    const int none = static_cast<int>(a_.size());
    for (int t = 0; t < s_.n_tokens && y.size() == y_.size(); ++t) {
      if (t % (none + 1) != none) continue;
      const size_t first = static_cast<size_t>(t * s_.rows);
      EXPECT_EQ(std::memcmp(y.data() + first, y_.data() + first, s_.rows * sizeof(float)), 0)
          << name() << ": token " << t << " uses no adapter but its row changed";
    }
  }

 private:
  LoraSpec s_;
  std::vector<float> x_, y_;
  std::vector<std::vector<float>> a_, b_, scales_;
  std::vector<double> bound_;
};

// --- matmul_glu: act(gate·x) ⊙ (up·x or given rows), within gated_bound ------------------------

struct GluSpec {
  DType gate_type = DType::kQ4_K;
  std::optional<DType> up_type;  // none: the second factor is rows of a given array (the PLE gate)
  kernels::GluActivation act = kernels::GluActivation::kGelu;
  int64_t cols = 256, n = 64;
  int n_tokens = 1;
};

class MatmulGluCase final : public OpCase {
 public:
  explicit MatmulGluCase(const GluSpec& s)
      : OpCase("matmul_glu", fmt::format("{} {} × {} of {} T={}",
                                         s.act == kernels::GluActivation::kGelu ? "gelu" : "silu",
                                         tensor::dtype_name(s.gate_type),
                                         s.up_type ? tensor::dtype_name(*s.up_type) : "given rows",
                                         s.cols, s.n, s.n_tokens)),
        s_(s),
        gate_(make_weights(s.gate_type, s.n, s.cols, static_cast<uint32_t>(s.n + s.cols))),
        x_(random_floats(static_cast<size_t>(s.n_tokens * s.cols), 41)) {
    if (s.up_type) {
      up_ = make_weights(*s.up_type, s.n, s.cols, static_cast<uint32_t>(s.n * 3 + s.cols));
    } else {
      up_rows_ = random_floats(static_cast<size_t>(s.n_tokens * up_stride()), 42);
    }
    if (x_q8()) xq_ = act_q8_values(x_, s.cols, s.n_tokens);
  }

  int64_t up_stride() const { return s_.n + 13; }  // a slice of wider rows
  // As a decode step gives them: the input's 8-bit form and the output's destination, each where
  // its width has one.
  bool x_q8() const { return decode() && kernels::act_q8_fits(s_.cols); }
  bool out_q8() const { return decode() && kernels::act_q8_fits(s_.n); }
  bool decode() const { return s_.n_tokens <= kernels::kActQ8MaxTokens; }
  bool has_q8() const override { return x_q8() || out_q8(); }

  Outputs run(Rig& rig, bool q8) const override {
    const size_t total = static_cast<size_t>(s_.n_tokens * s_.n);
    const size_t q8_bytes = kernels::act_q8_row_bytes(s_.n) * s_.n_tokens;
    kernels::GluMatmul a;
    a.gate = gate_.placed(rig);
    if (s_.up_type) {
      a.up = up_.placed(rig);
    } else {
      a.up_rows = rig.put(up_rows_);
      a.up_stride = up_stride();
    }
    a.act = s_.act;
    a.x = {rig.put(x_),
           q8 && x_q8() ? rig.put(act_q8_of(x_.data(), s_.cols, s_.n_tokens)) : nullptr};
    a.n_tokens = s_.n_tokens;
    a.out = rig.filled(total, kNaN);
    a.out_q8 = q8 && out_q8() ? rig.filled<uint8_t>(q8_bytes, kPoisonByte) : nullptr;
    a.scratch = rig.filled(total, kNaN);
    rig.backend().matmul_glu(a);
    Outputs out;
    out.f32["out"] = rig.read(a.out, total);
    if (a.out_q8 != nullptr)
      out.bytes["out_q8"] = rig.read(static_cast<const uint8_t*>(a.out_q8), q8_bytes);
    return out;
  }

  void check(const Outputs& got, const Outputs& want, const Target& target,
             bool q8) const override {
    const auto& w = output(want.f32, "out");
    const auto& o = output(got.f32, "out");
    const bool given = q8 && x_q8();
    const auto gate_rounding = target.activation_rounding(s_.gate_type, s_.n_tokens, given);
    const auto up_rounding =
        s_.up_type ? target.activation_rounding(*s_.up_type, s_.n_tokens, given) : gate_rounding;
    expect_near(
        o, w,
        [&](size_t idx) {
          const int64_t t = static_cast<int64_t>(idx) / s_.n, i = static_cast<int64_t>(idx) % s_.n;
          const float* x = x_.data() + t * s_.cols;
          const float* xq = given ? xq_.data() + t * s_.cols : nullptr;
          const float g = reference_product(gate_.row(i), x, s_.cols);
          const double tg = product_bound(gate_.row(i), x, xq, s_.cols, gate_rounding);
          if (!s_.up_type)
            return gated_bound(s_.act, g, up_rows_[t * up_stride() + i], tg, 0.0, w[idx]);
          return gated_bound(s_.act, g, reference_product(up_.row(i), x, s_.cols), tg,
                             product_bound(up_.row(i), x, xq, s_.cols, up_rounding), w[idx]);
        },
        "out");
    if (q8 && out_q8())
      expect_q8_form(target, output(got.bytes, "out_q8"), o, s_.n, s_.n_tokens, "out_q8");
  }

 private:
  GluSpec s_;
  Weights gate_, up_;
  std::vector<float> x_, xq_, up_rows_;
};

// --- residual_norm: within kResidualTolerance of the row's scale ---------------------------------

struct ResidualSpec {
  std::string name;
  int64_t n = 0;
  int n_rows = 0;
  bool branch0 = true, norm0 = false, branch1 = false, norm1 = false, sum_norm = false;
  float x_scale = 1.0f;
  struct Out {
    bool normalize = false, weight = false;
    float scale = 1.0f;
    bool mul = false, y = true, q8 = false;  // q8: given a destination when the case runs 8-bit
  };
  std::vector<Out> outs;
};

// Every f32 operation but the norms is exact and in the reference's order; each norm is within
// kNormRelative of each value. An error relative to a row's scale passes an add, a scale or a
// later norm (which is scale-invariant) as an error of the same order relative to the row's scale,
// and at most three norms stand on any path: 3·kNormRelative with margin, of |value| + rms(row).
constexpr double kResidualTolerance = 1e-6;

class ResidualNormCase final : public OpCase {
 public:
  explicit ResidualNormCase(ResidualSpec spec, uint32_t seed)
      : OpCase("residual_norm", spec.name), s_(std::move(spec)) {
    const size_t total = static_cast<size_t>(s_.n) * s_.n_rows;
    x_ = random_floats(total, seed, 2.0f);
    branch0_ = random_floats(total, seed + 1, 0.3f, 0.1f);
    branch1_ = random_floats(total, seed + 2, 5.0f, -0.2f);
    norm0_ = random_floats(s_.n, seed + 3, 0.4f, 1.0f);
    norm1_ = random_floats(s_.n, seed + 4, 0.4f, 0.8f);
    sum_norm_ = random_floats(s_.n, seed + 5, 0.3f, 1.2f);
    for (size_t j = 0; j < s_.outs.size(); ++j) {
      out_w_.push_back(random_floats(s_.n, seed + 10 + static_cast<uint32_t>(j), 0.5f, 1.0f));
      out_mul_.push_back(random_floats(s_.n, seed + 20 + static_cast<uint32_t>(j), 1.5f));
    }
  }

  bool has_q8() const override {
    const bool any =
        std::any_of(s_.outs.begin(), s_.outs.end(), [](const auto& o) { return o.q8; });
    return any && s_.n_rows <= kernels::kActQ8MaxTokens && kernels::act_q8_fits(s_.n);
  }

  Outputs run(Rig& rig, bool q8) const override {
    const size_t total = x_.size();
    const size_t q8_bytes = kernels::act_q8_row_bytes(s_.n) * s_.n_rows;
    kernels::ResidualNorm a;
    a.n = s_.n;
    a.n_rows = s_.n_rows;
    a.eps = 1e-6f;
    a.x = rig.put(x_);
    a.branch[0] = s_.branch0 ? rig.put(branch0_) : nullptr;
    a.branch[1] = s_.branch1 ? rig.put(branch1_) : nullptr;
    a.branch_norm[0] = s_.norm0 ? rig.put(norm0_) : nullptr;
    a.branch_norm[1] = s_.norm1 ? rig.put(norm1_) : nullptr;
    a.sum_norm = s_.sum_norm ? rig.put(sum_norm_) : nullptr;
    a.x_scale = s_.x_scale;
    a.n_out = static_cast<int>(s_.outs.size());
    for (size_t j = 0; j < s_.outs.size(); ++j) {
      const ResidualSpec::Out& spec = s_.outs[j];
      kernels::ResidualNorm::Output& o = a.out[j];
      o.normalize = spec.normalize;
      o.w = spec.weight ? rig.put(out_w_[j]) : nullptr;
      o.scale = spec.scale;
      o.mul = spec.mul ? rig.put(out_mul_[j]) : nullptr;
      o.y = spec.y ? rig.filled(total, kNaN) : nullptr;
      o.y_q8 = q8 && spec.q8 ? rig.filled<uint8_t>(q8_bytes, kPoisonByte) : nullptr;
    }
    rig.backend().residual_norm(a);
    Outputs out;
    out.f32["x"] = rig.read(a.x, total);
    if (a.branch[0] != nullptr) out.f32["branch[0]"] = rig.read(a.branch[0], total);
    if (a.branch[1] != nullptr) out.f32["branch[1]"] = rig.read(a.branch[1], total);
    for (int j = 0; j < a.n_out; ++j) {
      if (a.out[j].y != nullptr) out.f32[fmt::format("y{}", j)] = rig.read(a.out[j].y, total);
      if (a.out[j].y_q8 != nullptr) {
        out.bytes[fmt::format("y{}_q8", j)] =
            rig.read(static_cast<const uint8_t*>(a.out[j].y_q8), q8_bytes);
      }
    }
    return out;
  }

  void check(const Outputs& got, const Outputs& want, const Target& target,
             bool q8) const override {
    for (const auto& [name, w] : want.f32) {
      std::vector<double> rms(s_.n_rows);
      for (int r = 0; r < s_.n_rows; ++r) {
        double sum = 0;
        for (int64_t i = 0; i < s_.n; ++i)
          sum += static_cast<double>(w[r * s_.n + i]) * w[r * s_.n + i];
        rms[r] = std::sqrt(sum / static_cast<double>(s_.n));
      }
      expect_near(
          output(got.f32, name), w,
          [&](size_t i) { return kResidualTolerance * (std::fabs(w[i]) + rms[i / s_.n]); }, name);
    }
    if (!q8) return;
    for (size_t j = 0; j < s_.outs.size(); ++j) {
      if (!s_.outs[j].q8) continue;
      const std::string rows = s_.outs[j].y ? fmt::format("y{}", j) : "x";
      expect_q8_form(target, output(got.bytes, fmt::format("y{}_q8", j)), output(got.f32, rows),
                     s_.n, s_.n_rows, fmt::format("y{}_q8 (the 8-bit form of {})", j, rows));
    }
  }

 private:
  ResidualSpec s_;
  std::vector<float> x_, branch0_, branch1_, norm0_, norm1_, sum_norm_;
  std::vector<std::vector<float>> out_w_, out_mul_;
};

// --- attn_prep: q/k/v within the norms' bound through RoPE; the cache is store_kv of the backend's
// own k and v -------------------------------------------------------------------------------------

struct AttnPrepSpec {
  std::string name;
  int n_tokens = 1, n_head = 8, n_head_kv = 2, head_dim = 64;
  bool q_norm = true, k_norm = true, v_norm = false, v_from_k = false;
  bool shared = false;  // a layer that reads another's cache: only q is prepared
  kernels::RopeStyle style = kernels::RopeStyle::kRotateHalf;
  int n_rot = 64;
  float base = 10000.0f;
  DType k_type = DType::kF16, v_type = DType::kF16;
};

class AttnPrepCase final : public OpCase {
 public:
  explicit AttnPrepCase(AttnPrepSpec spec)
      : OpCase("attn_prep", spec.name),
        s_(std::move(spec)),
        rows_(s_.k_type, s_.v_type, kv_dim(), s_.n_tokens),
        freq_(rope_frequencies(s_.n_rot, s_.base)) {
    const int T = s_.n_tokens;
    q_ = random_floats(static_cast<size_t>(T) * s_.n_head * s_.head_dim, 51, 2.0f);
    k_ = random_floats(static_cast<size_t>(T) * kv_dim(), 52, 2.0f);
    v_ = random_floats(static_cast<size_t>(T) * kv_dim(), 53);
    q_norm_ = random_floats(s_.head_dim, 54, 0.4f, 1.0f);
    k_norm_ = random_floats(s_.head_dim, 55, 0.4f, 1.0f);
    for (int t = 0; t < T; ++t) pos_.push_back((t * 37 + 11) % 5000);
  }

  int kv_dim() const { return s_.n_head_kv * s_.head_dim; }

  Outputs run(Rig& rig, bool) const override {
    kernels::AttnPrep a;
    a.n_tokens = s_.n_tokens;
    a.n_head = s_.n_head;
    a.n_head_kv = s_.n_head_kv;
    a.head_dim = s_.head_dim;
    a.eps = 1e-6f;
    a.q = rig.put(q_);
    a.q_norm = s_.q_norm ? rig.put(q_norm_) : nullptr;
    a.pos = rig.put(pos_);
    a.rope = {s_.style, s_.n_rot, rig.put(freq_)};
    uint8_t* cache = nullptr;
    if (!s_.shared) {
      a.k = rig.put(k_);
      a.k_norm = s_.k_norm ? rig.put(k_norm_) : nullptr;
      a.v = rig.put(v_);
      a.v_from_k = s_.v_from_k;
      a.v_norm = s_.v_norm;
      a.k_type = s_.k_type;
      a.v_type = s_.v_type;
      cache = rig.filled<uint8_t>(rows_.total, 0xAB);
      a.dst = rig.put(rows_.at(cache));
    }
    rig.backend().attn_prep(a);
    Outputs out;
    out.f32["q"] = rig.read(a.q, q_.size());
    if (!s_.shared) {
      out.f32["k"] = rig.read(a.k, k_.size());
      out.f32["v"] = rig.read(a.v, v_.size());
      out.bytes["cache"] = rig.read(cache, rows_.total);
    }
    return out;
  }

  void check(const Outputs& got, const Outputs& want, const Target&, bool) const override {
    expect_prepared(output(got.f32, "q"), output(want.f32, "q"), s_.q_norm, "q");
    if (s_.shared) return;
    const auto& k = output(got.f32, "k");
    const auto& v = output(got.f32, "v");
    expect_prepared(k, output(want.f32, "k"), s_.k_norm, "k");
    const auto& want_v = output(want.f32, "v");
    expect_near(
        v, want_v, [&](size_t i) { return s_.v_norm ? kNormRelative * std::fabs(want_v[i]) : 0.0; },
        "v");
    // Exact: the rows hold store_kv of the k and v the backend prepared (whatever their last bits).
    if (k.size() == k_.size() && v.size() == v_.size()) {
      expect_same(output(got.bytes, "cache"),
                  rows_.reference(s_.k_type, s_.v_type, kv_dim(), k.data(), v.data()),
                  "cache rows (store_kv of the backend's own k and v)");
    }
  }

 private:
  // The value a rotated pair shares with index i of a head (itself past n_rot).
  int64_t rope_partner(int64_t i) const {
    const int d = static_cast<int>(i % s_.head_dim), half = s_.n_rot / 2;
    if (d >= s_.n_rot) return i;
    if (s_.style == kernels::RopeStyle::kAdjacent) return i - d + (d ^ 1);
    return d < half ? i + half : i - half;
  }
  // After a norm (within kNormRelative per value) the reference's rotation, bit-exact on equal
  // inputs, turns a pair's error vector with the pair: its length, ≤ kNormRelative·(|a| + |b|) ≤
  // kNormRelative·√2·|(a, b)|, is unchanged, and the two f32 rotations round once more each (2⁻²³
  // of the pair). So |Δ| ≤ 1e-6·(|a'| + |b'|) of the rotated pair; without a norm, exact.
  void expect_prepared(const std::vector<float>& got, const std::vector<float>& want, bool normed,
                       const std::string& what) const {
    expect_near(
        got, want,
        [&](size_t i) {
          if (!normed) return 0.0;
          return 1e-6 *
                 (std::fabs(want[i]) + std::fabs(want[rope_partner(static_cast<int64_t>(i))]));
        },
        what);
  }

  AttnPrepSpec s_;
  KvRows rows_;
  std::vector<float> freq_, q_, k_, v_, q_norm_, k_norm_;
  std::vector<int32_t> pos_;
};

// --- moe_glu: routing as moe_route, each chosen expert's GeGLU within gated_bound ----------------

struct MoeGluSpec {
  bool fused = true;  // one gate_up matrix (gate then up per expert) or two
  DType type = DType::kQ4_K;
  int n_expert = 8, k = 2;
  int64_t n_ff = 64, cols = 256;
  int n_tokens = 1;
  bool scaled = false;
};

class MoeGluCase final : public OpCase {
 public:
  explicit MoeGluCase(const MoeGluSpec& s)
      : OpCase("moe_glu",
               fmt::format("{} {} top {} of {} F={} of {} T={}{}", s.fused ? "gate_up" : "gate, up",
                           tensor::dtype_name(s.type), s.k, s.n_expert, s.n_ff, s.cols, s.n_tokens,
                           s.scaled ? ", scaled" : "")),
        s_(s) {
    const int64_t rows = s.n_expert * s.n_ff;
    const uint32_t seed = static_cast<uint32_t>(s.n_expert * 100 + s.n_tokens);
    if (s.fused) {
      gate_up_ = make_weights(s.type, 2 * rows, s.cols, seed);
    } else {
      gate_ = make_weights(s.type, rows, s.cols, seed);
      up_ = make_weights(s.type, rows, s.cols, seed + 1);
    }
    logits_ = random_floats(static_cast<size_t>(s.n_tokens) * s.n_expert, seed + 2, 2.0f);
    if (s.scaled) scale_ = random_floats(s.n_expert, seed + 3, 0.3f, 1.0f);
    x_ = random_floats(static_cast<size_t>(s.n_tokens * s.cols), seed + 4);
    if (x_q8()) xq_ = act_q8_values(x_, s.cols, s.n_tokens);
  }

  int slots() const { return s_.n_tokens * s_.k; }
  // As a decode step gives them: the input's 8-bit form for up to kActQ8MaxTokens tokens, the
  // destination of h's for up to kActQ8MaxTokens expert rows (tokens × k).
  bool x_q8() const {
    return s_.n_tokens <= kernels::kActQ8MaxTokens && kernels::act_q8_fits(s_.cols);
  }
  bool h_q8() const { return slots() <= kernels::kActQ8MaxTokens && kernels::act_q8_fits(s_.n_ff); }
  bool has_q8() const override { return x_q8() || h_q8(); }

  Outputs run(Rig& rig, bool q8) const override {
    const int T = s_.n_tokens;
    const int64_t F = s_.n_ff;
    const size_t h_total = static_cast<size_t>(slots() * F);
    const size_t q8_bytes = kernels::act_q8_row_bytes(F) * slots();
    kernels::MoeGlu a;
    a.router_logits = rig.put(logits_);
    a.n_expert = s_.n_expert;
    a.k = s_.k;
    a.expert_scale = scale_.empty() ? nullptr : rig.put(scale_);
    a.ids = rig.filled<int32_t>(slots(), -1);
    a.weights = rig.filled(slots(), kNaN);
    if (s_.fused) {
      a.gate_up = gate_up_.placed(rig);
    } else {
      a.gate = gate_.placed(rig);
      a.up = up_.placed(rig);
    }
    a.n_ff = F;
    a.x = {rig.put(x_), q8 && x_q8() ? rig.put(act_q8_of(x_.data(), s_.cols, T)) : nullptr};
    a.n_tokens = T;
    a.h = rig.filled(h_total, kNaN);
    a.h_q8 = q8 && h_q8() ? rig.filled<uint8_t>(q8_bytes, kPoisonByte) : nullptr;
    a.scratch_in = rig.filled(static_cast<size_t>(T * s_.cols), kNaN);
    a.scratch_gu = rig.filled(static_cast<size_t>(T * 2 * F), kNaN);
    a.scratch_h = rig.filled(static_cast<size_t>(T * F), kNaN);
    rig.backend().moe_glu(a);
    Outputs out;
    out.i32["ids"] = rig.read(a.ids, slots());
    out.f32["weights"] = rig.read(a.weights, slots());
    out.f32["h"] = rig.read(a.h, h_total);
    if (a.h_q8 != nullptr)
      out.bytes["h_q8"] = rig.read(static_cast<const uint8_t*>(a.h_q8), q8_bytes);
    return out;
  }

  void check(const Outputs& got, const Outputs& want, const Target& target,
             bool q8) const override {
    const auto& ids = output(want.i32, "ids");
    expect_same(output(got.i32, "ids"), ids, "ids");
    if (output(got.i32, "ids") != ids) return;  // other experts: the rest cannot compare
    expect_route_weights(target, output(got.f32, "weights"), output(want.f32, "weights"),
                         "weights");
    const int64_t F = s_.n_ff;
    const bool given = q8 && x_q8();
    const auto rounding = target.activation_rounding(s_.type, s_.n_tokens, given);
    const auto& w = output(want.f32, "h");
    const auto& h = output(got.f32, "h");
    expect_near(
        h, w,
        [&](size_t idx) {
          const int slot = static_cast<int>(static_cast<int64_t>(idx) / F);
          const int64_t i = static_cast<int64_t>(idx) % F;
          const int64_t e = ids[slot];
          const int64_t at = (slot / s_.k) * s_.cols;
          const float* x = x_.data() + at;
          const float* xq = given ? xq_.data() + at : nullptr;
          const float* g = s_.fused ? gate_up_.row(e * 2 * F + i) : gate_.row(e * F + i);
          const float* u = s_.fused ? gate_up_.row(e * 2 * F + F + i) : up_.row(e * F + i);
          return gated_bound(kernels::GluActivation::kGelu, reference_product(g, x, s_.cols),
                             reference_product(u, x, s_.cols),
                             product_bound(g, x, xq, s_.cols, rounding),
                             product_bound(u, x, xq, s_.cols, rounding), w[idx]);
        },
        "h");
    if (q8 && h_q8()) expect_q8_form(target, output(got.bytes, "h_q8"), h, F, slots(), "h_q8");
  }

 private:
  MoeGluSpec s_;
  Weights gate_up_, gate_, up_;
  std::vector<float> logits_, scale_, x_, xq_;
};

// --- moe_down: Σ_j weight_j · D_ids[j] · h_j within the weighted products' bounds
// -----------------

struct MoeDownSpec {
  DType type = DType::kQ4_K;
  int n_expert = 8, k = 2;
  int64_t n_ff = 256, n_embd = 96;
  int n_tokens = 1;
};

class MoeDownCase final : public OpCase {
 public:
  explicit MoeDownCase(const MoeDownSpec& s)
      : OpCase("moe_down", fmt::format("{} top {} of {} F={} H={} T={}", tensor::dtype_name(s.type),
                                       s.k, s.n_expert, s.n_ff, s.n_embd, s.n_tokens)),
        s_(s),
        down_(make_weights(s.type, s.n_expert * s.n_embd, s.n_ff,
                           static_cast<uint32_t>(s.n_expert + s.n_ff))) {
    std::mt19937 rng(static_cast<uint32_t>(s.n_tokens * 7 + s.k));
    std::vector<int32_t> experts(s.n_expert);
    std::iota(experts.begin(), experts.end(), 0);
    for (int t = 0; t < s.n_tokens; ++t) {  // k distinct experts per token, as a routing chooses
      std::shuffle(experts.begin(), experts.end(), rng);
      ids_.insert(ids_.end(), experts.begin(), experts.begin() + s.k);
    }
    std::uniform_real_distribution<float> weight(0.05f, 1.0f);
    for (int i = 0; i < slots(); ++i) weights_.push_back(weight(rng));
    h_ = random_floats(static_cast<size_t>(slots() * s.n_ff), 61);
    if (has_q8()) hq_ = act_q8_values(h_, s.n_ff, slots());
  }

  int slots() const { return s_.n_tokens * s_.k; }
  bool has_q8() const override {
    return slots() <= kernels::kActQ8MaxTokens && kernels::act_q8_fits(s_.n_ff);
  }

  Outputs run(Rig& rig, bool q8) const override {
    const int T = s_.n_tokens;
    kernels::MoeDown a;
    a.down = down_.placed(rig);
    a.n_expert = s_.n_expert;
    a.k = s_.k;
    a.ids = rig.put(ids_);
    a.weights = rig.put(weights_);
    a.h = {rig.put(h_), q8 ? rig.put(act_q8_of(h_.data(), s_.n_ff, slots())) : nullptr};
    a.n_tokens = T;
    a.out = rig.filled(static_cast<size_t>(T * s_.n_embd), kNaN);
    a.scratch_in = rig.filled(static_cast<size_t>(T * s_.n_ff), kNaN);
    a.scratch_out = rig.filled(static_cast<size_t>(T * s_.n_embd), kNaN);
    rig.backend().moe_down(a);
    Outputs out;
    out.f32["out"] = rig.read(a.out, static_cast<size_t>(T * s_.n_embd));
    return out;
  }

  // Each expert's product within product_bound, times |weight|; the f32 scaling and k additions
  // round at most k + 1 times: 1e-6 of Σ_j |weight_j · product_j| (k ≤ 8).
  void check(const Outputs& got, const Outputs& want, const Target& target,
             bool q8) const override {
    const int64_t H = s_.n_embd, F = s_.n_ff;
    const auto rounding = target.activation_rounding(s_.type, slots(), q8);
    expect_near(
        output(got.f32, "out"), output(want.f32, "out"),
        [&](size_t idx) {
          const int t = static_cast<int>(static_cast<int64_t>(idx) / H);
          const int64_t r = static_cast<int64_t>(idx) % H;
          double bound = 0, sum = 0;
          for (int j = 0; j < s_.k; ++j) {
            const int slot = t * s_.k + j;
            const float* row = down_.row(ids_[slot] * H + r);
            const float* h = h_.data() + slot * F;
            const float* hq = q8 ? hq_.data() + slot * F : nullptr;
            bound += std::fabs(weights_[slot]) * product_bound(row, h, hq, F, rounding);
            sum += std::fabs(weights_[slot] * reference_product(row, h, F));
          }
          return bound + 1e-6 * sum;
        },
        "out");
  }

 private:
  MoeDownSpec s_;
  Weights down_;
  std::vector<int32_t> ids_;
  std::vector<float> weights_, h_, hq_;
};

// --- top_k: exact (a selection: ties to the lower index, NaN below every number) -----------------

class TopKCase final : public OpCase {
 public:
  TopKCase(std::string what, std::vector<float> x, int64_t n, int k)
      : OpCase("top_k", fmt::format("{} n={} k={}", what, n, k)), x_(std::move(x)), n_(n), k_(k) {}

  Outputs run(Rig& rig, bool) const override {
    const int rows = static_cast<int>(static_cast<int64_t>(x_.size()) / n_);
    const size_t total = static_cast<size_t>(rows) * k_;
    int32_t* ids = rig.filled<int32_t>(total, -1);
    float* values = rig.filled(total, 0.0f);
    rig.backend().top_k(rig.put(x_), n_, rows, k_, ids, values);
    Outputs out;
    out.i32["ids"] = rig.read(ids, total);
    out.f32["values"] = rig.read(values, total);
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target&, bool) const override {
    expect_same_outputs(got, want);
  }

 private:
  std::vector<float> x_;
  int64_t n_;
  int k_;
};

// --- scatter: exact; the piece count is read where the op runs -----------------------------------

class ScatterCase final : public OpCase {
 public:
  explicit ScatterCase(int32_t count)
      : OpCase("scatter", fmt::format("{} of 6 pieces", count)), count_(count), src_(4096) {
    std::mt19937 rng(4);
    for (uint8_t& b : src_) b = static_cast<uint8_t>(rng());
  }

  Outputs run(Rig& rig, bool) const override {
    struct Span {
      uint32_t dst_at, offset, bytes;
    };
    // Every alignment of source and destination, and an empty piece.
    const Span spans[] = {{0, 0, 1024},  {1024, 16, 100}, {1200, 8, 40},
                          {1300, 4, 12}, {1401, 3, 777},  {2300, 0, 0}};
    uint8_t* dst = rig.filled<uint8_t>(4096, 0x5A);
    std::vector<kernels::ScatterPiece> pieces;
    for (const Span& s : spans) pieces.push_back({dst + s.dst_at, s.offset, s.bytes});
    rig.backend().scatter(rig.put(src_), rig.put(pieces), rig.put(std::vector<int32_t>{count_}),
                          static_cast<int>(pieces.size()));
    Outputs out;
    out.bytes["dst"] = rig.read(dst, 4096);
    return out;
  }
  void check(const Outputs& got, const Outputs& want, const Target&, bool) const override {
    expect_same_outputs(got, want);
  }

 private:
  int32_t count_;
  std::vector<uint8_t> src_;
};

// --- upload_async / download_async: the bytes, through the memory they require -------------------

class AsyncCopyCase final : public OpCase {
 public:
  explicit AsyncCopyCase(size_t bytes)
      : OpCase("async_copies", fmt::format("{} bytes", bytes)), data_(bytes) {
    std::mt19937 rng(static_cast<uint32_t>(bytes));
    for (uint8_t& b : data_) b = static_cast<uint8_t>(rng());
  }

  Outputs run(Rig& rig, bool) const override {
    kernels::Backend& b = rig.backend();
    auto staged_or = kernels::Buffer::make_host(b, data_.size());
    auto back_or = kernels::Buffer::make_host(b, data_.size());
    if (!staged_or.ok() || !back_or.ok()) throw SetupError("no host memory for the copies");
    const kernels::Buffer staged = std::move(staged_or).value(), back = std::move(back_or).value();
    std::memcpy(staged.get(), data_.data(), data_.size());
    std::memset(back.get(), 0, data_.size());
    uint8_t* dev = rig.filled<uint8_t>(data_.size(), 0);
    b.upload_async(dev, staged.get(), data_.size());
    b.download_async(back.get(), dev, data_.size());
    if (auto s = b.synchronize(); !s.ok()) throw SetupError(s.error().message());
    Outputs out;
    out.bytes["round trip"].assign(back.get<uint8_t>(), back.get<uint8_t>() + data_.size());
    return out;
  }
  void check(const Outputs& got, const Outputs&, const Target&, bool) const override {
    expect_same(output(got.bytes, "round trip"), data_, "round trip");
  }

 private:
  std::vector<uint8_t> data_;
};

// === The rows of the table
// ==========================================================================

using Cases = std::vector<std::unique_ptr<OpCase>>;

template <class C, class... Args>
void add(Cases& cases, Args&&... args) {
  cases.push_back(std::make_unique<C>(std::forward<Args>(args)...));
}

const DType kCacheTypes[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0};

// Every type tensor::dequantize_row decodes, with row lengths that are not multiples of 32 where
// the type allows, and one beyond 4096.
struct TypeCols {
  DType type;
  std::vector<int64_t> cols;
};
const std::vector<TypeCols>& type_cols() {
  static const std::vector<TypeCols> kTypes = {
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
  return kTypes;
}

Cases matmul_cases() {
  Cases c;
  for (const TypeCols& t : type_cols()) {
    for (int64_t cols : t.cols) {
      // Row counts that leave a remainder for any tiling of rows; fewer for long rows, whose
      // reference quantizers and products dominate the table's time.
      for (int64_t rows : {int64_t{5}, cols > 1024 ? int64_t{33} : int64_t{67}})
        add<MatmulCase>(c, t.type, cols, rows);
    }
  }
  return c;
}

Cases get_rows_cases() {
  Cases c;
  for (const TypeCols& t : type_cols()) add<GetRowsCase>(c, t.type, t.cols.back());
  return c;
}

// Sizes around 8-lane vectors and the CPU's threading threshold (16384 values).
constexpr int64_t kSizes[] = {1, 7, 8, 9, 100, 40001};

Cases rmsnorm_cases() {
  Cases c;
  for (int64_t n : kSizes) {
    for (int64_t rows : {1, 3}) {
      for (bool weighted : {true, false}) add<RmsnormCase>(c, n, rows, weighted);
    }
  }
  return c;
}

Cases rope_cases() {
  Cases c;
  for (auto style : {kernels::RopeStyle::kAdjacent, kernels::RopeStyle::kRotateHalf}) {
    for (int n_tokens : {1, 5, 300}) add<RopeCase>(c, style, n_tokens, 3, 24, 16, 10000.0f);
  }
  add<RopeCase>(c, kernels::RopeStyle::kRotateHalf, 3, 8, 256, 256, 10000.0f);  // Gemma sliding
  add<RopeCase>(c, kernels::RopeStyle::kRotateHalf, 2, 4, 512, 128, 1e6f);      // partial, global
  add<RopeCase>(c, kernels::RopeStyle::kAdjacent, 4, 4, 64, 64, 10000.0f);      // llama
  return c;
}

Cases elementwise_cases() {
  Cases c;
  for (int64_t n : kSizes) add<ElementwiseCase>(c, n);
  return c;
}

Cases copy_rows_cases() {
  Cases c;
  for (int64_t rows : {1, 3, 300}) add<CopyRowsCase>(c, rows);
  return c;
}

Cases glu_activation_cases() {
  Cases c;
  for (auto act : {kernels::GluActivation::kSilu, kernels::GluActivation::kGelu}) {
    for (int64_t n : kSizes) {
      for (int64_t rows : {1, 3}) add<GluActivationCase>(c, act, n, rows);
    }
  }
  return c;
}

Cases moe_route_cases() {
  Cases c;
  for (int n_expert : {4, 128, 512}) {
    for (int k : {1, 2, 4, 8}) {
      if (k > n_expert) continue;
      for (bool scaled : {false, true}) add<MoeRouteCase>(c, n_expert, k, scaled);
    }
  }
  return c;
}

Cases store_kv_cases() {
  Cases c;
  for (DType k : kCacheTypes) {
    for (DType v : kCacheTypes) {
      for (int n : {1, 5, 130}) add<StoreKvCase>(c, k, v, n);
    }
  }
  return c;
}

Cases attention_cases() {
  Cases c;
  auto name = [](const AttentionSpec& s, const std::string& what) {
    return fmt::format("{} K {} V {} head_dim {} heads {}/{} window {}", what,
                       tensor::dtype_name(s.k_type), tensor::dtype_name(s.v_type), s.head_dim,
                       s.n_head, s.n_head_kv, s.window);
  };
  // Every pair of cache types; three decode tokens over two sequences (37 and 300 cells): 4 query
  // heads per KV head, and Gemma's sliding layer shape (8 per KV head, a window).
  for (DType k : kCacheTypes) {
    for (DType v : kCacheTypes) {
      AttentionSpec s{.head_dim = 128, .k_type = k, .v_type = v};
      s.name = name(s, "types");
      add<AttentionCase>(c, s);
      AttentionSpec sliding{.head_dim = 256, .n_head_kv = 1, .k_type = k, .v_type = v, .window = 6};
      sliding.name = name(sliding, "types");
      add<AttentionCase>(c, sliding);
    }
  }
  // Head sizes and query groups (8, 2 and 1 query heads per KV head; one per KV head only for
  // small heads, whose caches stay quick to build), with and without a window.
  for (int head_dim : {64, 256, 512}) {
    for (int n_head_kv : {1, 4, 8}) {
      if (n_head_kv == 8 && head_dim > 64) continue;
      AttentionSpec s{.head_dim = head_dim, .n_head_kv = n_head_kv};
      s.name = name(s, "shapes");
      add<AttentionCase>(c, s);
      s.k_type = DType::kQ8_0;
      s.v_type = DType::kQ4_0;
      s.window = 6;
      s.name = name(s, "shapes");
      add<AttentionCase>(c, s);
    }
  }
  // Query heads the CPU attends in groups over one read of their KV head: 16 per KV head (two
  // groups of at most 8), and one decode token whose 12 heads are split between the threads.
  {
    AttentionSpec s{.head_dim = 64, .n_head = 16, .n_head_kv = 1};
    s.name = name(s, "groups");
    add<AttentionCase>(c, s);
    AttentionSpec one{.head_dim = 128, .n_head = 12, .n_head_kv = 1, .window = 6};
    one.queries = {{1, 250}};
    one.name = name(one, "groups, one token");
    add<AttentionCase>(c, one);
  }
  // A head of 8 values: a 32-value block of a cache row spans 4 KV heads.
  for (DType t : kCacheTypes) {
    AttentionSpec s{.head_dim = 8, .n_head_kv = 4, .k_type = t, .v_type = t};
    s.name = name(s, "small heads");
    add<AttentionCase>(c, s);
  }
  // Decode without the split's working memory.
  for (DType t : {DType::kF16, DType::kQ8_0}) {
    AttentionSpec s{.head_dim = 256, .k_type = t, .v_type = t, .partials = false};
    s.name = name(s, "no partials");
    add<AttentionCase>(c, s);
  }
  // Long contexts: a device splits them into chunks; a window of 512 over 1100 cells.
  for (int window : {0, 512}) {
    AttentionSpec one{.head_dim = 256, .n_head_kv = 1, .window = window, .sequences = {1100}};
    one.queries = {{0, 1090}};
    for (DType t : {DType::kF16, DType::kQ8_0}) {
      one.k_type = one.v_type = t;
      one.name = name(one, "long, one token");
      add<AttentionCase>(c, one);
    }
    AttentionSpec eight{.head_dim = 256, .n_head_kv = 1, .window = window, .sequences = {1100, 37}};
    eight.queries = {{0, 1000}, {0, 1001}, {1, 30},  {0, 1002},
                     {0, 1099}, {1, 31},   {0, 700}, {0, 1003}};
    eight.name = name(eight, "long, eight tokens");
    add<AttentionCase>(c, eight);
  }
  // Tokens inside an image (positions 8–20) that see all of it both ways (attend_from,
  // attend_until), with and without a window — which then limits only the keys outside the image.
  for (int window : {0, 6}) {
    AttentionSpec s{
        .k_type = DType::kF16, .v_type = DType::kQ8_0, .window = window, .sequences = {40}};
    s.queries = {{0, 10, 8, 20}, {0, 19, 8, 20}, {0, 25}, {0, 20, 8, 20}};
    s.name = name(s, "image");
    add<AttentionCase>(c, s);
  }
  // Prefill: twelve tokens of one sequence (no partials beyond a decode batch).
  {
    AttentionSpec s{
        .head_dim = 256, .k_type = DType::kQ4_0, .v_type = DType::kF16, .sequences = {64}};
    s.queries.clear();
    for (int t = 0; t < 12; ++t) s.queries.push_back({0, 40 + t});
    s.name = name(s, "prefill");
    add<AttentionCase>(c, s);
    s.window = 6;
    s.name = name(s, "prefill");
    add<AttentionCase>(c, s);
  }
  // A prefill the CPU attends in tiles of up to 8 tokens per read of a KV head (one query head per
  // KV head): runs of two sequences, tokens inside an image (positions 52–56) among causal ones,
  // with and without a window.
  for (int window : {0, 6}) {
    AttentionSpec s{
        .head_dim = 64, .n_head = 2, .n_head_kv = 2, .window = window, .sequences = {80, 40}};
    s.queries.clear();
    for (int t = 0; t < 40; ++t) {
      const bool second = t >= 11 && t < 16;  // a run of the other sequence inside a tile
      const int32_t pos = second ? 20 + t : 40 + t;
      const bool in_image = !second && pos >= 52 && pos <= 56;
      s.queries.push_back(in_image ? AttentionSpec::Query{0, pos, 52, 56}
                                   : AttentionSpec::Query{second ? 1 : 0, pos});
    }
    s.name = name(s, "prefill tiles");
    add<AttentionCase>(c, s);
  }
  // Nothing visible: every key after the query. Exactly 0, with or without the split.
  for (bool partials : {true, false}) {
    AttentionSpec s{.n_head = 2,
                    .n_head_kv = 1,
                    .v_type = DType::kQ8_0,
                    .sequences = {20},
                    .partials = partials,
                    .nothing_visible = true};
    s.queries = {{0, 10}};
    s.name = name(s, partials ? "nothing visible" : "nothing visible, no partials");
    add<AttentionCase>(c, s);
  }
  return c;
}

Cases matmuls_cases() {
  Cases c;
  // Each type as one product, decode (with 8-bit activations where the type allows) and prefill.
  for (const TypeCols& t : type_cols()) {
    const int64_t cols = t.cols.size() > 1 ? t.cols[1] : t.cols[0];
    for (int n_tokens : {1, 5, 8, 12})
      add<MatmulsCase>(c, std::vector{std::pair{t.type, int64_t{67}}}, cols, n_tokens);
  }
  // q, k and v of one layer: three products of one input, in mixed types.
  for (int n_tokens : {1, 3, 8, 20}) {
    add<MatmulsCase>(
        c,
        std::vector{std::pair{DType::kQ4_K, int64_t{256}}, std::pair{DType::kQ4_K, int64_t{128}},
                    std::pair{DType::kQ6_K, int64_t{128}}},
        512, n_tokens);
    add<MatmulsCase>(
        c,
        std::vector{std::pair{DType::kQ8_0, int64_t{96}}, std::pair{DType::kQ4_0, int64_t{32}},
                    std::pair{DType::kQ5_K, int64_t{32}}},
        256, n_tokens);
  }
  return c;
}

Cases matmul_glu_cases() {
  Cases c;
  using kernels::GluActivation;
  // gate · x and up · x in one type or two, and the per-layer-input gate: gelu(gate·x) ⊙ a slice
  // of the per-layer inputs (no up matrix).
  const GluSpec specs[] = {
      {.gate_type = DType::kQ4_K, .up_type = DType::kQ4_K, .cols = 512, .n = 96},
      {.gate_type = DType::kQ8_0,
       .up_type = DType::kQ6_K,
       .act = GluActivation::kSilu,
       .cols = 256,
       .n = 160},
      {.gate_type = DType::kF16, .up_type = DType::kF16, .cols = 96, .n = 64},
      {.gate_type = DType::kQ4_0, .cols = 256, .n = 256},
      {.gate_type = DType::kQ5_K, .cols = 512, .n = 32},
  };
  for (int n_tokens : {1, 3, 8, 12}) {
    for (GluSpec s : specs) {
      s.n_tokens = n_tokens;
      add<MatmulGluCase>(c, s);
    }
  }
  // A width that has no 8-bit form.
  add<MatmulGluCase>(c, GluSpec{.gate_type = DType::kQ8_0,
                                .up_type = DType::kQ8_0,
                                .act = GluActivation::kSilu,
                                .cols = 96,
                                .n = 50,
                                .n_tokens = 2});
  return c;
}

Cases lora_cases() {
  Cases c;
  // Decode and prefill batches, one adapter or three of different ranks, rows a GPU block splits
  // unevenly, and the widths of real projections.
  for (int n_tokens : {1, 3, 8, 33}) {
    add<LoraCase>(c, LoraSpec{.cols = 64, .rows = 48, .ranks = {8}, .n_tokens = n_tokens});
    add<LoraCase>(c, LoraSpec{.cols = 100, .rows = 300, .ranks = {4, 16, 1}, .n_tokens = n_tokens});
  }
  add<LoraCase>(c, LoraSpec{.cols = 2560, .rows = 2048, .ranks = {16}, .n_tokens = 2});
  add<LoraCase>(c, LoraSpec{.cols = 4096, .rows = 64, .ranks = {64, 8}, .n_tokens = 5});
  return c;
}

Cases residual_norm_cases() {
  using Out = ResidualSpec::Out;
  const Out norm_q8{.normalize = true, .weight = true, .q8 = true};
  const std::vector<ResidualSpec> specs = {
      {.name = "attention, E2B width", .n = 1536, .n_rows = 3, .norm0 = true, .outs = {norm_q8}},
      {.name = "MoE FFN with three outputs",
       .n = 2816,
       .n_rows = 8,
       .norm0 = true,
       .branch1 = true,
       .norm1 = true,
       .sum_norm = true,
       .x_scale = 0.7f,
       .outs = {norm_q8, {.y = false, .q8 = true}, {.scale = 0.5f, .mul = true, .q8 = true}}},
      {.name = "odd width",
       .n = 100,
       .n_rows = 5,
       .branch1 = true,
       .sum_norm = true,
       .x_scale = 1.5f,
       .outs = {{.normalize = true, .weight = true}, {.scale = 3.0f}}},
      {.name = "weightless norm",
       .n = 1536,
       .n_rows = 2,
       .norm0 = true,
       .outs = {{.normalize = true, .scale = 0.125f, .mul = true, .q8 = true}}},
      {.name = "prefill rows",
       .n = 2560,
       .n_rows = 300,
       .norm0 = true,
       .outs = {{.normalize = true, .weight = true}}},
      {.name = "width 5376", .n = 5376, .n_rows = 2, .norm0 = true, .outs = {norm_q8}},
      {.name = "width 20000",
       .n = 20000,
       .n_rows = 2,
       .norm0 = true,
       .branch1 = true,
       .norm1 = true,
       .sum_norm = true,
       .x_scale = 0.5f,
       .outs = {norm_q8}},
      {.name = "a layer's input norm only (no branch)",
       .n = 1536,
       .n_rows = 4,
       .branch0 = false,
       .outs = {norm_q8, {.y = false, .q8 = true}}},
  };
  Cases c;
  uint32_t seed = 100;
  for (const ResidualSpec& s : specs) {
    add<ResidualNormCase>(c, s, seed);
    seed += 50;
  }
  return c;
}

Cases attn_prep_cases() {
  using kernels::RopeStyle;
  const std::vector<AttnPrepSpec> specs = {
      {.name = "Gemma sliding layer, decode",
       .n_head_kv = 1,
       .head_dim = 256,
       .v_norm = true,
       .n_rot = 256},
      {.name = "Gemma global layer, v from k",
       .n_tokens = 3,
       .head_dim = 512,
       .v_norm = true,
       .v_from_k = true,
       .n_rot = 128,
       .base = 1e6f,
       .k_type = DType::kQ8_0,
       .v_type = DType::kQ8_0},
      {.name = "Gemma KV-shared layer",
       .n_tokens = 2,
       .n_head_kv = 1,
       .head_dim = 256,
       .k_norm = false,
       .shared = true,
       .n_rot = 256},
      {.name = "llama, no norms",
       .n_tokens = 4,
       .n_head_kv = 4,
       .q_norm = false,
       .k_norm = false,
       .style = RopeStyle::kAdjacent,
       .k_type = DType::kQ4_0,
       .v_type = DType::kF32},
      {.name = "prefill",
       .n_tokens = 20,
       .n_head = 4,
       .head_dim = 128,
       .v_norm = true,
       .n_rot = 128,
       .k_type = DType::kF32,
       .v_type = DType::kQ4_0},
      {.name = "odd head, partial rotation",
       .n_tokens = 5,
       .n_head = 3,
       .n_head_kv = 3,
       .head_dim = 24,
       .k_norm = false,
       .style = RopeStyle::kAdjacent,
       .n_rot = 16,
       .v_type = DType::kF32},
  };
  Cases c;
  for (const AttnPrepSpec& s : specs) add<AttnPrepCase>(c, s);
  return c;
}

Cases moe_glu_cases() {
  Cases c;
  for (int n_tokens : {1, 2, 4, 12}) {
    add<MoeGluCase>(c, MoeGluSpec{.n_tokens = n_tokens});
    add<MoeGluCase>(c, MoeGluSpec{.fused = false,
                                  .type = DType::kQ8_0,
                                  .n_expert = 10,
                                  .k = 4,
                                  .n_ff = 64,
                                  .cols = 128,
                                  .n_tokens = n_tokens,
                                  .scaled = true});
    add<MoeGluCase>(c, MoeGluSpec{.type = DType::kF16,
                                  .n_expert = 4,
                                  .k = 1,
                                  .n_ff = 32,
                                  .cols = 64,
                                  .n_tokens = n_tokens,
                                  .scaled = true});
  }
  return c;
}

Cases moe_down_cases() {
  Cases c;
  for (int n_tokens : {1, 2, 4, 12}) {
    add<MoeDownCase>(c, MoeDownSpec{.n_tokens = n_tokens});
    add<MoeDownCase>(c, MoeDownSpec{.type = DType::kQ8_0,
                                    .n_expert = 10,
                                    .k = 4,
                                    .n_ff = 96,
                                    .n_embd = 128,
                                    .n_tokens = n_tokens});
    add<MoeDownCase>(c, MoeDownSpec{.type = DType::kQ6_K,
                                    .n_expert = 4,
                                    .k = 1,
                                    .n_ff = 256,
                                    .n_embd = 40,
                                    .n_tokens = n_tokens});
  }
  return c;
}

Cases top_k_cases() {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = random_floats(2 * 262144, 1, 3.0f);  // Gemma's vocabulary
  const std::vector<float> odd = random_floats(3 * 4099, 3, 1.0f, 1.0f);
  // Rows where most values tie: zeros of both signs, infinities, NaNs.
  std::mt19937 rng(2);
  const float pool[] = {kNaN, -kNaN, -kInf, kInf, -0.0f, 0.0f, 1.0f, -1.0f, 2.5f};
  std::vector<float> tied(4 * 5000);
  for (float& v : tied) v = pool[rng() % std::size(pool)];
  // A masked row with fewer finite values than k, and an ascending one (every value admitted).
  std::vector<float> masked(50000, -kInf), ascending(20000);
  for (size_t i = 0; i < masked.size(); i += 7) masked[i] = kNaN;
  masked[3] = masked[49999] = masked[20000] = 1.0f;
  for (size_t i = 0; i < ascending.size(); ++i) ascending[i] = static_cast<float>(i) - 5000.0f;
  Cases c;
  for (int k : {1, 40, 64}) {
    add<TopKCase>(c, "logits", logits, 262144, k);
    add<TopKCase>(c, "odd width", odd, 4099, k);
    add<TopKCase>(c, "ties", tied, 5000, k);
    add<TopKCase>(c, "masked", masked, 50000, k);
    add<TopKCase>(c, "ascending", ascending, 20000, k);
  }
  return c;
}

Cases scatter_cases() {
  Cases c;
  for (int32_t count : {0, 3, 6}) add<ScatterCase>(c, count);
  return c;
}

Cases async_copy_cases() {
  Cases c;
  for (size_t bytes : {size_t{1}, size_t{1000}, size_t{1} << 20}) add<AsyncCopyCase>(c, bytes);
  return c;
}

const std::map<std::string, Cases (*)()>& table() {
  static const std::map<std::string, Cases (*)()> kTable = {
      {"matmul", matmul_cases},
      {"get_rows", get_rows_cases},
      {"rmsnorm", rmsnorm_cases},
      {"rope", rope_cases},
      {"attention", attention_cases},
      {"store_kv", store_kv_cases},
      {"elementwise", elementwise_cases},
      {"copy_rows", copy_rows_cases},
      {"glu_activations", glu_activation_cases},
      {"moe_route", moe_route_cases},
      {"matmuls", matmuls_cases},
      {"matmul_glu", matmul_glu_cases},
      {"lora", lora_cases},
      {"residual_norm", residual_norm_cases},
      {"attn_prep", attn_prep_cases},
      {"moe_glu", moe_glu_cases},
      {"moe_down", moe_down_cases},
      {"top_k", top_k_cases},
      {"scatter", scatter_cases},
      {"async_copies", async_copy_cases},
  };
  return kTable;
}

}  // namespace

const std::vector<std::string>& families() {
  static const std::vector<std::string> kFamilies = [] {
    std::vector<std::string> names;
    for (const auto& [name, make] : table()) names.push_back(name);
    return names;
  }();
  return kFamilies;
}

const std::vector<std::unique_ptr<OpCase>>& cases(const std::string& family) {
  static std::map<std::string, Cases> built;
  auto it = built.find(family);
  if (it == built.end()) it = built.emplace(family, table().at(family)()).first;
  return it->second;
}

}  // namespace backend_cases
