// One table of kernel cases that runs unchanged on every kernels::Backend (the way ggml's
// test-backend-ops runs one case list on every backend): the harness — backend memory through the
// Backend interface, the outputs a case reads back, what a backend under test declares about its
// rounding — and the table itself (backend_cases.cpp).
//
// A case builds its random inputs once, on the host. run() puts them in a backend's memory
// (allocate/upload, so host and device backends alike), issues the op and reads every output back
// (download). The truth is the same run() on kernels::ref::RefBackend, whose fused ops are
// Backend's composed defaults (ops.cpp) over the reference primitives; check() compares a backend's
// outputs with it within the tolerance the case states.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/cpu/dot.h"
#include "kernels/ops.h"
#include "tensor/dtype.h"
#include "testing/testing.h"

namespace backend_cases {

using kernels::DType;

using testing_util::random_floats;

// A case could not be set up on a backend (memory refused, a copy failed): the runner reports it.
struct SetupError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One run's memory on a backend. Every allocation and copy goes through kernels::Backend, so one
// case body serves host backends (where this is plain memory) and device backends.
class Rig {
 public:
  explicit Rig(kernels::Backend& backend) : backend_(backend) {}
  kernels::Backend& backend() const { return backend_; }

  // A copy of `values` in the backend's memory.
  template <class T>
  T* put(const std::vector<T>& values) {
    void* p = allocate(values.size() * sizeof(T));
    upload(p, values.data(), values.size() * sizeof(T));
    return static_cast<T*>(p);
  }
  // n copies of `value`: outputs start as NaN (or a byte pattern) so a value never written shows.
  template <class T>
  T* filled(size_t n, T value) {
    return put(std::vector<T>(n, value));
  }
  // n values at `p` (backend memory), once every op issued so far has finished.
  template <class T>
  std::vector<T> read(const T* p, size_t n) {
    std::vector<T> out(n);
    download(out.data(), p, n * sizeof(T));
    return out;
  }

 private:
  void* allocate(size_t bytes);
  void upload(void* dst, const void* src, size_t bytes);
  void download(void* dst, const void* src, size_t bytes);

  kernels::Backend& backend_;
  std::vector<kernels::Buffer> buffers_;
};

// One sequence's K/V cache as kv::Cache lays it out: cells in blocks of 16 rows, each block an
// allocation of its own; random rows quantized to the cache types; positions not in cell order (a
// ring's), every 7th cell empty (−1).
struct PagedCache {
  static constexpr int kCellsPerBlock = 16;
  DType k_type, v_type;
  int n_head_kv, head_dim, n_cells;
  size_t k_row = 0, v_row = 0;
  std::vector<uint8_t> k_rows, v_rows;  // [n_cells] rows
  std::vector<int32_t> pos;

  PagedCache(DType k_type, DType v_type, int n_head_kv, int head_dim, int n_cells, uint32_t seed);
  // Its blocks, block tables, cell positions and KvSpan in rig's memory: what attention reads.
  const kernels::KvSpan* place(Rig& rig) const;
};

// What a case reads back after its op, by name.
struct Outputs {
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<int32_t>> i32;
  std::map<std::string, std::vector<uint8_t>> bytes;
};
// Empty when a and b hold the same names and bits; else the first difference, in words.
std::string difference(const Outputs& a, const Outputs& b);

// What a backend's matrix product multiplies the weights with.
struct ActivationRounding {
  enum class Kind {
    kF32,       // the f32 activations
    kBlocks,    // its own 8-bit blocks of `block` values (the CPU's partner formats)
    kGiven8Bit  // the 8-bit activations it was given (act_q8.h), or the f32 ones
  };
  Kind kind = Kind::kF32;
  int block = 0;
};

// The backend under test and what it declares about its arithmetic: the tolerances depend on it.
struct Target {
  std::string name;
  kernels::Backend* backend = nullptr;
  // How its product of a `type` matrix with n_tokens activation rows rounds them, when it was
  // given their 8-bit form (q8_given) or not.
  std::function<ActivationRounding(DType type, int n_tokens, bool q8_given)> activation_rounding;
  // Whether it computes exp with the host's libm, as the reference does (moe_route's weights then
  // carry the reference's bits); CUDA's double exp may differ in a double's last bit.
  bool host_libm = true;
};

// The CPU backend's rounding at an instruction-set level: the partner format of its dot kernel
// (kernels/cpu/dot.h), whatever it is given.
ActivationRounding cpu_activation_rounding(DType type, kernels::cpu::Isa isa);

// One row of the table.
class OpCase {
 public:
  OpCase(std::string family, std::string name)
      : family_(std::move(family)), name_(std::move(name)) {}
  virtual ~OpCase() = default;
  const std::string& family() const { return family_; }
  const std::string& name() const { return name_; }
  // Whether the case also runs with 8-bit activations: the f32 input's act_q8 form given to the
  // consumer (Activations.q8), and a destination given to the producer (the *_q8 pointers).
  virtual bool has_q8() const { return false; }
  virtual Outputs run(Rig& rig, bool q8) const = 0;
  // got: the backend's outputs; want: the reference's (run with q8 = false).
  virtual void check(const Outputs& got, const Outputs& want, const Target& target,
                     bool q8) const = 0;

 private:
  std::string family_, name_;
};

// The families of the table (gtest names: one test per family and backend), and their cases.
const std::vector<std::string>& families();
const std::vector<std::unique_ptr<OpCase>>& cases(const std::string& family);

// The largest batch and row a case passes to a matmul: a CPU target reserves this much scratch (a
// CpuBackend falls back to ref::matmul for wider rows, which would test nothing).
inline constexpr int kMaxTokens = 64;
inline constexpr int64_t kMaxCols = 8192;

// Runs `c` on `backend` into `out`; false, with the reason reported as a failure of the current
// test, when the backend refused the setup or reported an error at synchronize().
bool run_case(const OpCase& c, kernels::Backend& backend, bool q8, Outputs& out);

}  // namespace backend_cases
