// doctor observations — what each probe measured, as plain numbers. The rules (rules.h) read only
// these, so every rule can be tested on injected values; the probes (probes.h) fill them in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace doctor {

// A probe's result, or why it could not run (never a guess in its place).
template <class T>
struct Probe {
  std::optional<T> value;
  std::string not_run;  // when !value: why it could not run, in words a user can act on

  static Probe skipped(std::string why) { return {std::nullopt, std::move(why)}; }
  bool ran() const { return value.has_value(); }
  const T& operator*() const { return *value; }
  const T* operator->() const { return &*value; }
};

// Where the plan puts the model's bytes, per device.
struct DeviceBytes {
  std::string name;
  bool gpu = false;
  bool simulated = false;  // an --assume-gpu what-if, not present hardware
  uint64_t budget = 0;
  uint64_t weights = 0;
  uint64_t kv = 0;
  uint64_t other = 0;  // activations, logits, host structures
};

struct PlacementFacts {
  std::vector<DeviceBytes> devices;  // [0] is the CPU
  int n_layer = 0;
  int n_cpu_layers = 0;  // with a GPU: layers kept on the CPU
  std::string applied;   // what --fit changed, if anything
  bool has_gpu() const { return devices.size() > 1; }
};

struct Alternative {
  std::string change, flags;
  double tokens_per_second = 0;
  bool all_on_gpu = false;  // no layer left on the CPU
};

// A process and the RAM it holds (resident set).
struct ProcessMemory {
  std::string name;  // "firefox (pid 4242)"
  uint64_t rss = 0;
};

struct BudgetFacts {
  bool fits = true;
  std::vector<std::string> problems;      // one per device over budget
  std::vector<Alternative> alternatives;  // configurations that fit, fastest first
  std::string applied;                    // what --fit changed to make it fit
  std::string nothing_fits;  // when no alternative fits: which part alone exceeds which budget
  // RAM: the plan's need against its budget and against the machine's RAM, to tell memory other
  // processes hold from a model too large for this machine.
  uint64_t ram_need = 0;
  uint64_t ram_budget = 0;
  uint64_t ram_total = 0;
  uint64_t ram_margin = 0;                 // what a budget leaves for the OS
  bool ram_budget_is_available = false;    // the budget is RAM available now (not --cpu-mem)
  bool gpus_fit = true;                    // every GPU's bytes are within its budget
  std::vector<ProcessMemory> ram_holders;  // other processes by RSS, largest first
  uint64_t ram_short() const { return ram_need > ram_budget ? ram_need - ram_budget : 0; }
  // The need fits this machine's RAM, were nothing else holding it.
  bool fits_machine() const { return ram_need + ram_margin <= ram_total; }
};

// Decode speed of one sequence at a short and a long context depth, with the bytes the plan
// says a token reads at each.
struct KvGrowthFacts {
  int short_depth = 0, long_depth = 0;
  double tps_short = 0, tps_long = 0;
  uint64_t bytes_short = 0, bytes_long = 0;
  uint64_t llc_bytes = 0;  // the CPU's last-level cache (0: unknown)
  double measured_slowdown() const { return tps_long > 0 ? tps_short / tps_long : 0; }
  bool fits_in_cache() const { return llc_bytes > 0 && bytes_long <= llc_bytes; }
  double expected_slowdown() const {
    return bytes_short ? static_cast<double>(bytes_long) / static_cast<double>(bytes_short) : 0;
  }
};

// One sample of the process's and the system's memory during the measured run.
struct MemorySample {
  double seconds = 0;  // since the first sample
  uint64_t rss = 0;
  uint64_t rss_anon = 0;  // RSS that is anonymous memory: what the process allocated
  uint64_t rss_file = 0;  // RSS that is file pages: the mapped weights as they are read
  uint64_t mem_available = 0;
  uint64_t mem_total = 0;
  uint64_t swap_used = 0;
  // Of this process, cumulative; a first read of a lazily read table is a major fault too, so
  // this is evidence of nothing by itself.
  uint64_t major_faults = 0;
  uint64_t weights_resident = 0;
  uint64_t weights_bytes = 0;    // the pages the weights span
  uint64_t weights_evicted = 0;  // cumulative: weight pages resident at a sample, gone at a later
};

struct MemoryFacts {
  std::vector<MemorySample> samples;  // after warm-up, in time order
  uint64_t kv_bytes = 0;  // the planned KV cache, whose pages are first touched during the run
  uint64_t buffer_bytes = 0;  // the planned activations, logits and host structures
};

struct ProcessLoad {
  std::string name;
  double cpus = 0;  // CPUs it kept busy on average
};

struct ContentionFacts {
  int n_cpus = 0;         // online CPUs
  int threads = 0;        // threads headroom's kernels use
  double other_cpus = 0;  // CPUs kept busy by everything but this process, on average
  double steal_cpus = 0;  // of that, taken by the hypervisor for other machines
  double loadavg_1m = 0;
  std::vector<ProcessLoad> busiest;  // the other processes using the most CPU, busiest first
  int n_concurrent = 0;
  double single_tps = 0;      // one stream
  double concurrent_tps = 0;  // n_concurrent streams at once, in total
};

struct BackendFacts {
  std::string backend;         // "cpu" or "ref"
  std::string isa_in_use;      // the SIMD level the CPU kernels use
  std::string isa_best;        // the best level this CPU supports
  bool isa_capped = false;     // isa_in_use below isa_best
  std::string isa_cap_source;  // e.g. "HEADROOM_ISA=avx2"
  int threads = 0;
  std::string gpu_hardware;        // an NVIDIA GPU seen on this machine, or empty
  bool gpu_backend_built = false;  // this build can run layers on a GPU
  uint64_t bytes_on_real_gpu = 0;  // bytes the plan puts on present (not simulated) GPUs
};

struct OffloadFacts {
  bool simulated_gpu = false;
  int n_cpu_layers = 0, n_layer = 0;
  uint64_t cpu_layer_bytes_per_token = 0;  // weights and KV of the layers kept on the CPU
  double predicted_cpu_seconds = 0;        // per token, those layers at the CPU's bandwidth
  double predicted_transfer_seconds = 0;   // per token, activations across the link
  double predicted_tps = 0;                // this placement
  double predicted_tps_all_on_gpu = 0;     // every layer on the GPU (budget aside)
  double measured_cpu_seconds =
      0;  // those layers' share of the decode measured here (0: not measured)
  std::optional<Alternative> fits_entirely;  // a configuration with every layer on the GPU
};

// One reading of a GPU's clocks and limits (NVML-like).
struct GpuSample {
  std::string name;
  double sm_clock_mhz = 0, max_sm_clock_mhz = 0;
  double temperature_c = 0;
  double power_w = 0, power_limit_w = 0;
  double utilization = 0;         // 0..1
  bool thermal_slowdown = false;  // the driver reports a software or hardware thermal slowdown
  bool power_cap = false;         // clocks held by the power limit
  bool hw_slowdown = false;       // hardware slowdown (power brake, overheating)
};

struct ThrottleFacts {
  std::vector<GpuSample> samples;  // taken under load
};

struct RooflineFacts {
  uint64_t bytes_per_token = 0;  // from the plan, at the measured depth
  double measured_tps = 0;
  double bandwidth = 0;    // bytes/s: the best of the probes before and after the decode (same
                           // threads) and what the decode itself read from RAM, or the GPU's peak
  uint64_t llc_bytes = 0;  // the CPU's last-level cache (0: unknown)
  double roofline_tps() const {
    return bytes_per_token ? bandwidth / static_cast<double>(bytes_per_token) : 0;
  }
  double share() const { return roofline_tps() > 0 ? measured_tps / roofline_tps() : 0; }
  bool fits_in_cache() const { return llc_bytes > 0 && bytes_per_token <= llc_bytes; }
};

struct EndpointFacts {
  std::string url;
  double single_ttft = 0, single_tps = 0;  // seconds; tokens/s of one stream
  int n_concurrent = 0;
  double concurrent_ttft_p50 = 0;
  double concurrent_tps = 0;  // all streams together
  int errors = 0;
  std::string first_error;
};

struct Observations {
  Probe<PlacementFacts> placement;
  Probe<BudgetFacts> budget;
  Probe<BackendFacts> backend;
  Probe<OffloadFacts> offload;
  Probe<KvGrowthFacts> kv_growth;
  Probe<MemoryFacts> memory;
  Probe<ContentionFacts> contention;
  Probe<ThrottleFacts> throttle;
  Probe<RooflineFacts> roofline;
  Probe<EndpointFacts> endpoint;
};

}  // namespace doctor
