// The decision table of `headroom doctor` (docs/doctor.md lists the same rows) and its evaluation.
#include "doctor/rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "util/units.h"

namespace doctor {
namespace {

// Thresholds: the measurements are noisy, so a rule fires only on a clear departure.
constexpr double kKvSlowdownTolerance = 1.5;  // measured / expected slowdown before it is a problem
constexpr double kBandwidthBoundShare = 0.6;  // of the roofline: decode is bandwidth-bound
constexpr double kOtherCpusBusy = 0.5;        // CPUs kept busy by other processes
constexpr double kConcurrentMinGain = 0.9;    // concurrent total / single stream
constexpr uint64_t kSwapGrowth = 16ull << 20;  // swap that grew during the run
constexpr double kEvictedShare = 0.01;         // of the weights' pages, evicted during the run
constexpr uint64_t kEvictedMin = 1ull << 20;
constexpr uint64_t kAnonSlack = 32ull << 20;   // anonymous growth beyond the KV cache and buffers
constexpr double kLowAvailableShare = 0.05;    // of RAM still available
constexpr double kOffloadCliff = 0.7;          // offloaded / all-on-GPU predicted speed
constexpr double kClockLow = 0.7;              // SM clock / max under load
constexpr double kClockHeld = 0.9;
constexpr double kEndpointBatchGain = 1.3;  // concurrent total / single for a batching server

using Fire = std::optional<Finding>;
std::string bytes(uint64_t b) {
  return util::format_bytes(b);
}
std::string ms(double seconds) {
  return fmt::format("{:.2f} ms", seconds * 1e3);
}

std::string placement_line(const PlacementFacts& p) {
  std::string line;
  for (const auto& d : p.devices) {
    line += fmt::format("{}{}: weights {}, KV {}, other {} (budget {})", line.empty() ? "" : "; ",
                        d.name, bytes(d.weights), bytes(d.kv), bytes(d.other), bytes(d.budget));
  }
  return line;
}

const GpuSample* slowest_gpu(const ThrottleFacts& t) {
  const GpuSample* worst = nullptr;
  for (const auto& s : t.samples) {
    if (!(s.max_sm_clock_mhz > 0) || std::isnan(s.sm_clock_mhz)) continue;  // NaN: not read
    if (!worst ||
        s.sm_clock_mhz / s.max_sm_clock_mhz < worst->sm_clock_mhz / worst->max_sm_clock_mhz)
      worst = &s;
  }
  return worst;
}

std::string gpu_line(const GpuSample& s) {
  // A field the driver did not give is NaN (gpu_sample): say so, never show a made-up 0.
  using std::isnan;
  const std::string clock =
      isnan(s.sm_clock_mhz) ? "unknown"
      : s.max_sm_clock_mhz > 0
          ? fmt::format("{:.0f} of {:.0f} MHz ({:.0f}%)", s.sm_clock_mhz, s.max_sm_clock_mhz,
                        100 * s.sm_clock_mhz / s.max_sm_clock_mhz)
          : fmt::format("{:.0f} MHz (maximum unknown)", s.sm_clock_mhz);
  const std::string temperature =
      isnan(s.temperature_c) ? "temperature unknown" : fmt::format("{:.0f} °C", s.temperature_c);
  const std::string power = isnan(s.power_w) ? "power unknown"
                            : isnan(s.power_limit_w)
                                ? fmt::format("{:.0f} W", s.power_w)
                                : fmt::format("{:.0f} of {:.0f} W", s.power_w, s.power_limit_w);
  const std::string busy = isnan(s.utilization) ? "utilisation unknown"
                                                : fmt::format("{:.0f}% busy", 100 * s.utilization);
  return fmt::format("{}: SM clock {}, {}, {}, {}", s.name, clock, temperature, power, busy);
}

// The memory series, summarized: first sample vs. the rest.
struct MemoryTrend {
  uint64_t swap_growth = 0, major_faults = 0, anon_growth = 0, file_growth = 0, evicted = 0;
  uint64_t min_available = 0, total = 0, weights_bytes = 0;
  double min_resident_share = 1;
  double seconds = 0;
};

uint64_t growth(uint64_t from, uint64_t to) {
  return to > from ? to - from : 0;
}

MemoryTrend trend(const MemoryFacts& m) {
  MemoryTrend t;
  if (m.samples.empty()) return t;
  const auto& first = m.samples.front();
  const auto& last = m.samples.back();
  t.seconds = last.seconds - first.seconds;
  t.total = first.mem_total;
  t.min_available = first.mem_available;
  for (const auto& s : m.samples) {
    t.swap_growth = std::max(t.swap_growth, growth(first.swap_used, s.swap_used));
    t.anon_growth = std::max(t.anon_growth, growth(first.rss_anon, s.rss_anon));
    t.file_growth = std::max(t.file_growth, growth(first.rss_file, s.rss_file));
    t.min_available = std::min(t.min_available, s.mem_available);
    if (s.weights_bytes > 0) {
      t.min_resident_share =
          std::min(t.min_resident_share,
                   static_cast<double>(s.weights_resident) / static_cast<double>(s.weights_bytes));
    }
  }
  t.major_faults = growth(first.major_faults, last.major_faults);
  t.evicted = growth(first.weights_evicted, last.weights_evicted);
  t.weights_bytes = last.weights_bytes;
  return t;
}

bool weights_evicted(const MemoryTrend& t) {
  const auto share = static_cast<uint64_t>(kEvictedShare * static_cast<double>(t.weights_bytes));
  return t.evicted > 0 && t.evicted >= std::max(kEvictedMin, share);
}

std::string memory_line(const MemoryFacts& m) {
  const MemoryTrend t = trend(m);
  return fmt::format(
      "{} samples over {:.1f} s: anonymous memory +{} (file pages +{}), swap +{}, weights ≥{:.0f}% "
      "resident, {} of them evicted, {} major faults, RAM available ≥{} of {}",
      m.samples.size(), t.seconds, bytes(t.anon_growth), bytes(t.file_growth), bytes(t.swap_growth),
      100 * t.min_resident_share, bytes(t.evicted), t.major_faults, bytes(t.min_available),
      bytes(t.total));
}

std::string holders_line(const std::vector<ProcessMemory>& holders, size_t n) {
  std::string line;
  for (size_t i = 0; i < holders.size() && i < n; ++i)
    line += fmt::format("{}{} ({})", i ? ", " : "", holders[i].name, bytes(holders[i].rss));
  return line;
}

// The largest holders of RAM, for a memory verdict's action ("" when none is known).
std::string largest_holders(const Observations& o) {
  if (!o.budget.ran() || o.budget->ram_holders.empty()) return "";
  return "largest: " + holders_line(o.budget->ram_holders, 3);
}

// The request fits this machine's RAM and every GPU, but not the RAM other processes left free.
bool ram_held_by_others(const BudgetFacts& b) {
  return !b.fits && b.ram_short() > 0 && b.ram_budget_is_available && b.fits_machine() &&
         b.gpus_fit;
}

// "free 3.1 GiB (e.g. close a (pid 1, 2.0 GiB), b (pid 2, 1.5 GiB))": the fewest of the largest
// holders that together hold what is short.
std::string free_ram_line(const BudgetFacts& b) {
  size_t n = 0;
  uint64_t held = 0;
  while (n < b.ram_holders.size() && n < 3 && held < b.ram_short()) held += b.ram_holders[n++].rss;
  std::string line = fmt::format("free {}", bytes(b.ram_short()));
  if (n > 0) line += fmt::format(" (e.g. close {})", holders_line(b.ram_holders, n));
  return line;
}

std::string busiest_line(const ContentionFacts& c) {
  std::string line;
  for (size_t i = 0; i < c.busiest.size() && i < 3; ++i) {
    line += fmt::format("{}{} ({:.1f} CPUs)", i ? ", " : "", c.busiest[i].name, c.busiest[i].cpus);
  }
  return line.empty() ? "none identified" : line;
}

std::string alternatives_line(const std::vector<Alternative>& alts) {
  std::string line;
  for (size_t i = 0; i < alts.size() && i < 3; ++i) {
    line += fmt::format("{}({}) {} [{}] ≈{:.1f} tok/s", i ? "; " : "", i + 1, alts[i].change,
                        alts[i].flags, alts[i].tokens_per_second);
  }
  return line;
}

// clang-format off
const std::vector<Rule> kRules = {
// ── placement: what sits on which device ─────────────────────────────────────────────────────
{"placement", "placement.kv-on-host", Status::kProblem,
 "a GPU is planned, every layer's weights are on it, but KV cache bytes sit in host RAM",
 "the KV cache spilled to host RAM: every token reads it across the host link, more as the context grows",
 "give the KV cache GPU memory: a quantized KV cache (--kv-type-k q8_0 --kv-type-v q8_0), a shorter --ctx or fewer --slots",
 [](const Observations& o) -> Fire {
   const auto& p = *o.placement;
   if (!p.has_gpu() || p.n_cpu_layers > 0 || p.devices[0].kv == 0) return {};
   return Finding{fmt::format("{} of KV cache on {} while the layers run on {}", bytes(p.devices[0].kv),
                              p.devices[0].name, p.devices[1].name), ""};
 }},
{"placement", "placement.weights-spill", Status::kProblem,
 "a GPU is planned and some layers' weights are in host RAM",
 "the GPU budget is too small for the whole model, so layers spilled to slower host memory",
 "see the partial offload line: a configuration that fits entirely on the GPU is usually faster",
 [](const Observations& o) -> Fire {
   const auto& p = *o.placement;
   if (!p.has_gpu() || p.devices[0].weights == 0) return {};
   return Finding{fmt::format("{} of {} layers ({} of weights, {} of KV) on {}; {}", p.n_cpu_layers, p.n_layer,
                              bytes(p.devices[0].weights), bytes(p.devices[0].kv), p.devices[0].name,
                              placement_line(p)), ""};
 }},
{"placement", "placement.cpu-only", Status::kOk,
 "no GPU is planned: everything is in RAM",
 "this machine has no GPU headroom can use, so the CPU runs every layer (expected)",
 "none; plan a GPU what-if with --assume-gpu MEM@GB/s",
 [](const Observations& o) -> Fire {
   if (o.placement->has_gpu()) return {};
   return Finding{placement_line(*o.placement), ""};
 }},
{"placement", "placement.on-gpu", Status::kOk,
 "a GPU is planned and holds every layer and the KV cache",
 "the whole model fits the GPU budget",
 "none",
 [](const Observations& o) -> Fire { return Finding{placement_line(*o.placement), ""}; }},

// ── hardware budget: can the model fit well ──────────────────────────────────────────────────
{"budget", "budget.ram-held-by-others", Status::kProblem,
 "only RAM is short, its budget is the RAM available now, and the request fits in the machine's total RAM",
 "other processes hold the RAM this request needs: it fits this machine, not the RAM free now",
 "free the RAM it lacks (close the largest holders), or run now with a configuration that fits",
 [](const Observations& o) -> Fire {
   const auto& b = *o.budget;
   if (!ram_held_by_others(b)) return {};
   std::string action = free_ram_line(b);
   if (!b.alternatives.empty()) action += "; or now: " + alternatives_line({b.alternatives.front()});
   return Finding{fmt::format("RAM needed {}, budget {} (available now less a {} margin), machine {}; other "
                              "processes hold the most: {}",
                              bytes(b.ram_need), bytes(b.ram_budget), bytes(b.ram_margin), bytes(b.ram_total),
                              b.ram_holders.empty() ? "none identified" : holders_line(b.ram_holders, 5)),
                  action};
 }},
{"budget", "budget.does-not-fit", Status::kProblem,
 "the request does not fit the memory budgets, and freeing RAM would not make it fit",
 "the model, context and slots need more memory than the budgets allow",
 "use a configuration that fits (the planner's alternatives, fastest first)",
 [](const Observations& o) -> Fire {
   const auto& b = *o.budget;
   if (b.fits || ram_held_by_others(b)) return {};
   std::string problems;
   for (const auto& p : b.problems) problems += (problems.empty() ? "" : "; ") + p;
   if (!b.alternatives.empty()) return Finding{problems, alternatives_line(b.alternatives)};
   return Finding{problems, fmt::format("no configuration of this model fits{}: use a smaller model",
                                        b.nothing_fits.empty() ? "" : " — " + b.nothing_fits)};
 }},
{"budget", "budget.fits-after-change", Status::kNote,
 "it fits only after --fit changed the request",
 "the request as given did not fit; --fit applied the fastest change that does",
 "keep the change, or raise the budgets (--cpu-mem, --gpu-mem) to run the request as given",
 [](const Observations& o) -> Fire {
   if (o.budget->applied.empty()) return {};
   return Finding{fmt::format("--fit applied: {}", o.budget->applied), ""};
 }},
{"budget", "budget.fits", Status::kOk,
 "the request fits the budgets",
 "the budgets hold the model, its KV cache and buffers",
 "none",
 [](const Observations&) -> Fire { return Finding{"fits every device's budget", ""}; }},

// ── backend: the kernels in use and any GPU left idle ────────────────────────────────────────
{"backend", "backend.reference", Status::kProblem,
 "the scalar reference kernels run the model",
 "--backend ref selects the slow reference kernels (a correctness baseline, not for speed)",
 "use the fast kernels: --backend auto (the default) or cpu",
 [](const Observations& o) -> Fire {
   if (o.backend->backend != "ref") return {};
   return Finding{fmt::format("backend ref (scalar), {} threads", o.backend->threads), ""};
 }},
{"backend", "backend.simd-capped", Status::kProblem,
 "the CPU kernels use a lower SIMD level than the CPU supports",
 "the SIMD level is capped below what this CPU can do",
 "remove the cap",
 [](const Observations& o) -> Fire {
   const auto& b = *o.backend;
   if (!b.isa_capped) return {};
   return Finding{fmt::format("cpu kernels use {} but this CPU supports {} ({})", b.isa_in_use, b.isa_best,
                              b.isa_cap_source),
                  b.isa_cap_source.empty() ? "" : fmt::format("unset {}", b.isa_cap_source.substr(0, b.isa_cap_source.find('=')))};
 }},
{"backend", "backend.gpu-unused", Status::kProblem,
 "an NVIDIA GPU is present but the plan puts nothing on it",
 "CPU fallback: this build has no GPU backend (or the GPU is not usable), so the CPU runs everything",
 "build headroom with CUDA (nvcc present at configure time) and check the driver (nvidia-smi)",
 [](const Observations& o) -> Fire {
   const auto& b = *o.backend;
   if (b.gpu_hardware.empty() || b.bytes_on_real_gpu > 0) return {};
   return Finding{fmt::format("GPU present ({}); 0 bytes planned on it; GPU backend in this build: {}", b.gpu_hardware,
                              b.gpu_backend_built ? "yes" : "no"), ""};
 }},
{"backend", "backend.ok", Status::kOk,
 "the SIMD kernels run at the best level this CPU supports",
 "the fastest kernels this build has for this machine",
 "none",
 [](const Observations& o) -> Fire {
   const auto& b = *o.backend;
   return Finding{fmt::format("backend {} ({}, the best this CPU supports), {} threads{}", b.backend, b.isa_in_use,
                              b.threads, b.gpu_hardware.empty() ? "; no GPU present" : ""), ""};
 }},

// ── partial offload: the cost of layers on the slower device ─────────────────────────────────
{"partial offload", "offload.cliff", Status::kProblem,
 "layers on the CPU make the predicted speed much lower than with every layer on the GPU",
 "partial offload: each token waits for the CPU layers at host-memory bandwidth (the offload cliff)",
 "prefer a configuration that fits entirely on the GPU",
 [](const Observations& o) -> Fire {
   const auto& f = *o.offload;
   if (f.n_cpu_layers == 0 || f.predicted_tps >= kOffloadCliff * f.predicted_tps_all_on_gpu) return {};
   std::string measured = f.measured_cpu_seconds > 0
       ? fmt::format("; measured on this CPU: those layers take {}/token", ms(f.measured_cpu_seconds))
       : "; not measured (the model is too large to run here quickly)";
   return Finding{fmt::format("{} of {} layers on the CPU ({}/token read there): predicted {}/token on the CPU + {} "
                              "transfers{}; {:.1f} tok/s vs {:.1f} with every layer on the GPU{}",
                              f.n_cpu_layers, f.n_layer, bytes(f.cpu_layer_bytes_per_token), ms(f.predicted_cpu_seconds),
                              ms(f.predicted_transfer_seconds), measured, f.predicted_tps, f.predicted_tps_all_on_gpu,
                              f.simulated_gpu ? " (what-if GPU from --assume-gpu)" : ""),
                  f.fits_entirely ? fmt::format("{} [{}] ≈{:.1f} tok/s", f.fits_entirely->change, f.fits_entirely->flags,
                                                f.fits_entirely->tokens_per_second)
                                  : "a smaller quantization or a GPU with more memory (none of the planner's changes fits entirely)"};
 }},
{"partial offload", "offload.mild", Status::kNote,
 "some layers are on the CPU but cost little",
 "partial offload with a small share of the work on the CPU",
 "none needed; a configuration that fits entirely would still be a little faster",
 [](const Observations& o) -> Fire {
   const auto& f = *o.offload;
   if (f.n_cpu_layers == 0) return {};
   return Finding{fmt::format("{} of {} layers on the CPU: {:.1f} tok/s predicted vs {:.1f} all on the GPU",
                              f.n_cpu_layers, f.n_layer, f.predicted_tps, f.predicted_tps_all_on_gpu), ""};
 }},
{"partial offload", "offload.none", Status::kOk,
 "every layer is on the GPU",
 "no partial offload",
 "none",
 [](const Observations& o) -> Fire {
   return Finding{fmt::format("all {} layers on the GPU{}: {:.1f} tok/s predicted", o.offload->n_layer,
                              o.offload->simulated_gpu ? " (what-if)" : "", o.offload->predicted_tps), ""};
 }},

// ── KV growth: speed at a long context vs. a short one ───────────────────────────────────────
{"kv growth", "kv-growth.worse-than-bytes", Status::kProblem,
 "decode slows with context depth much more than the extra KV bytes per token explain",
 "attention costs more than its memory traffic: the KV cache is in slower memory, or the attention kernel is compute-bound at depth",
 "check placement (KV on host?), quantize the KV cache (--kv-type-k q8_0 --kv-type-v q8_0) and measure with `headroom bench --ctx-depth`",
 [](const Observations& o) -> Fire {
   const auto& k = *o.kv_growth;
   if (k.measured_slowdown() <= kKvSlowdownTolerance * k.expected_slowdown() || k.fits_in_cache()) return {};
   return Finding{fmt::format("{:.1f} tok/s at depth {} vs {:.1f} at depth {}: {:.2f}× slower, but a token reads only "
                              "{:.2f}× the bytes ({} vs {})",
                              k.tps_long, k.long_depth, k.tps_short, k.short_depth, k.measured_slowdown(),
                              k.expected_slowdown(), bytes(k.bytes_long), bytes(k.bytes_short)), ""};
 }},
{"kv growth", "kv-growth.compute-in-cache", Status::kNote,
 "decode slows with depth more than the bytes explain, but the model and its KV cache fit in the CPU's last-level cache",
 "memory traffic is not the limit for a model this small: attention's compute (a dot product and a softmax term per position) grows with depth",
 "none; the bytes rule applies to models larger than the cache",
 [](const Observations& o) -> Fire {
   const auto& k = *o.kv_growth;
   if (k.measured_slowdown() <= kKvSlowdownTolerance * k.expected_slowdown() || !k.fits_in_cache()) return {};
   return Finding{fmt::format("{:.1f} tok/s at depth {} vs {:.1f} at depth {}: {:.2f}× slower for {:.2f}× the bytes per "
                              "token ({} vs {}); {}/token fits the {} last-level cache",
                              k.tps_long, k.long_depth, k.tps_short, k.short_depth, k.measured_slowdown(),
                              k.expected_slowdown(), bytes(k.bytes_long), bytes(k.bytes_short), bytes(k.bytes_long),
                              bytes(k.llc_bytes)), ""};
 }},
{"kv growth", "kv-growth.as-expected", Status::kOk,
 "the slowdown at depth matches the extra KV bytes per token",
 "normal: a longer context means more KV cache to read per token",
 "none; a quantized KV cache reads fewer bytes if long contexts matter",
 [](const Observations& o) -> Fire {
   const auto& k = *o.kv_growth;
   return Finding{fmt::format("{:.1f} tok/s at depth {} vs {:.1f} at depth {}: {:.2f}× slower for {:.2f}× the bytes per "
                              "token ({} vs {})",
                              k.tps_long, k.long_depth, k.tps_short, k.short_depth, k.measured_slowdown(),
                              k.expected_slowdown(), bytes(k.bytes_long), bytes(k.bytes_short)), ""};
 }},

// ── memory pressure over the session ─────────────────────────────────────────────────────────
{"memory pressure", "memory.swapping", Status::kProblem,
 "swap use grew during the run",
 "RAM is over-committed: pages of this or other processes are being swapped out",
 "free RAM (close programs), or lower the footprint: a smaller --ctx, fewer --slots, a quantized KV cache or model",
 [](const Observations& o) -> Fire {
   if (trend(*o.memory).swap_growth < kSwapGrowth) return {};
   return Finding{memory_line(*o.memory), largest_holders(o)};
 }},
{"memory pressure", "memory.weights-evicted", Status::kProblem,
 "weight pages that were resident in RAM left it during the run (mincore), at least 1% of them",
 "the page cache evicted the model's weights under memory pressure; each eviction is re-read from disk",
 "free RAM so the weights stay resident, or use a smaller quantization; the model file should sit on a local SSD",
 [](const Observations& o) -> Fire {
   if (!weights_evicted(trend(*o.memory))) return {};
   return Finding{memory_line(*o.memory), largest_holders(o)};
 }},
{"memory pressure", "memory.growth", Status::kProblem,
 "the process's anonymous memory grew beyond its planned KV cache and buffers during the run",
 "memory accumulates over the session (a leak or an unbounded buffer), beyond what the plan holds",
 "report it with this output; restart long-running sessions until it is fixed",
 [](const Observations& o) -> Fire {
   const auto& m = *o.memory;
   const uint64_t first_anon = m.samples.empty() ? 0 : m.samples.front().rss_anon;
   const uint64_t planned = m.kv_bytes + m.buffer_bytes;
   if (trend(m).anon_growth <= planned + std::max(kAnonSlack, first_anon / 10)) return {};
   return Finding{fmt::format("{} (the KV cache and buffers account for at most {})", memory_line(m), bytes(planned)), ""};
 }},
{"memory pressure", "memory.low-available", Status::kProblem,
 "RAM available fell below 5% of the total during the run",
 "the system is about to swap or evict page cache",
 "free RAM (close programs) or lower the footprint (--ctx, --slots, quantized KV or model)",
 [](const Observations& o) -> Fire {
   const MemoryTrend t = trend(*o.memory);
   if (t.total == 0 || t.min_available >= kLowAvailableShare * t.total) return {};
   return Finding{memory_line(*o.memory), largest_holders(o)};
 }},
{"memory pressure", "memory.stable", Status::kOk,
 "no swap growth, no weight pages evicted, no anonymous growth beyond the planned KV cache and buffers",
 "memory is stable over the session",
 "none",
 [](const Observations& o) -> Fire { return Finding{memory_line(*o.memory), ""}; }},

// ── contention: other processes, and concurrent streams ──────────────────────────────────────
{"contention", "contention.other-processes", Status::kProblem,
 "other processes keep CPUs busy that headroom's threads need",
 "CPU contention: other processes (or the hypervisor) take cores from the decode threads, and each step waits for the slowest thread",
 "stop or pause the busiest processes, or give headroom only the free cores",
 [](const Observations& o) -> Fire {
   const auto& c = *o.contention;
   if (c.other_cpus < kOtherCpusBusy || c.threads + c.other_cpus <= c.n_cpus + 0.25) return {};
   const int free_cores = std::max(1, static_cast<int>(std::floor(c.n_cpus - c.other_cpus)));
   return Finding{fmt::format("other processes kept {:.1f} of {} CPUs busy (steal {:.1f}) while headroom used {} threads; "
                              "load average {:.2f}; busiest: {}",
                              c.other_cpus, c.n_cpus, c.steal_cpus, c.threads, c.loadavg_1m, busiest_line(c)),
                  fmt::format("--threads {}", free_cores)};
 }},
{"contention", "contention.oversubscribed", Status::kProblem,
 "more kernel threads than CPUs",
 "threads oversubscribe the CPUs; they take turns and every step waits",
 "use at most one thread per core",
 [](const Observations& o) -> Fire {
   const auto& c = *o.contention;
   if (c.threads <= c.n_cpus) return {};
   return Finding{fmt::format("{} threads on {} CPUs", c.threads, c.n_cpus), fmt::format("--threads {}", c.n_cpus)};
 }},
{"contention", "contention.concurrent-slower", Status::kProblem,
 "several streams at once deliver fewer tokens/s in total than one stream",
 "batching does not pay here: each batched step costs more than the tokens it adds (compute-bound, or contention)",
 "serve with fewer --slots, and check the other contention lines",
 [](const Observations& o) -> Fire {
   const auto& c = *o.contention;
   if (c.n_concurrent < 2 || c.concurrent_tps >= kConcurrentMinGain * c.single_tps) return {};
   return Finding{fmt::format("{} concurrent streams: {:.1f} tok/s in total vs {:.1f} for one stream",
                              c.n_concurrent, c.concurrent_tps, c.single_tps), ""};
 }},
{"contention", "contention.none", Status::kOk,
 "the CPUs are free for headroom and concurrent streams add throughput",
 "no contention",
 "none",
 [](const Observations& o) -> Fire {
   const auto& c = *o.contention;
   return Finding{fmt::format("other processes {:.1f} of {} CPUs, headroom {} threads; {} concurrent streams {:.1f} "
                              "tok/s in total vs {:.1f} for one ({:.2f}×)",
                              c.other_cpus, c.n_cpus, c.threads, c.n_concurrent, c.concurrent_tps, c.single_tps,
                              c.single_tps > 0 ? c.concurrent_tps / c.single_tps : 0), ""};
 }},

// ── thermal / power throttling (GPU) ─────────────────────────────────────────────────────────
{"throttling", "throttle.thermal", Status::kProblem,
 "the driver reports a thermal slowdown",
 "the GPU is too hot and lowers its clocks",
 "improve cooling (airflow, fans, dust), or lower the power limit to run cooler and steadier",
 [](const Observations& o) -> Fire {
   for (const auto& s : o.throttle->samples) {
     if (s.thermal_slowdown || s.hw_slowdown) return Finding{gpu_line(s) + "; thermal slowdown reported", ""};
   }
   return {};
 }},
{"throttling", "throttle.power-cap", Status::kProblem,
 "clocks held below their maximum by the power limit",
 "the power limit caps the clocks",
 "raise the power limit (nvidia-smi -pl) or check the power mode / supply",
 [](const Observations& o) -> Fire {
   for (const auto& s : o.throttle->samples) {
     if (s.power_cap && s.sm_clock_mhz < kClockHeld * s.max_sm_clock_mhz) return Finding{gpu_line(s) + "; power cap reported", ""};
   }
   return {};
 }},
{"throttling", "throttle.low-clocks", Status::kProblem,
 "clocks far below maximum under load with no reason reported",
 "the GPU runs in a low-power state (power-saving mode, application clocks, or a driver setting)",
 "check `nvidia-smi -q -d PERFORMANCE,CLOCK`, enable persistence mode, reset application clocks",
 [](const Observations& o) -> Fire {
   for (const auto& s : o.throttle->samples) {
     const bool reason = s.thermal_slowdown || s.hw_slowdown || s.power_cap;
     if (!reason && s.utilization >= 0.5 && s.sm_clock_mhz < kClockLow * s.max_sm_clock_mhz) return Finding{gpu_line(s), ""};
   }
   return {};
 }},
{"throttling", "throttle.none", Status::kOk,
 "clocks near maximum under load, no throttle reason",
 "no throttling",
 "none",
 [](const Observations& o) -> Fire {
   const GpuSample* s = slowest_gpu(*o.throttle);
   return Finding{s ? gpu_line(*s) : "no clock readings", ""};
 }},

// ── roofline: measured decode vs. bandwidth / bytes per token ────────────────────────────────
{"roofline", "roofline.bandwidth-bound", Status::kOk,
 "decode reaches at least 60% of the roofline (bandwidth ÷ bytes per token), and a token's bytes exceed the CPU's last-level cache",
 "normal: bandwidth-bound — this is the speed this machine's memory allows",
 "none; only fewer bytes per token (a smaller quantization, a quantized KV cache) or more bandwidth go faster",
 [](const Observations& o) -> Fire {
   const auto& r = *o.roofline;
   if (r.share() < kBandwidthBoundShare || r.fits_in_cache()) return {};
   return Finding{fmt::format("{:.1f} tok/s = {:.0f}% of the roofline {:.1f} tok/s ({:.1f} GB/s measured now ÷ {}/token)",
                              r.measured_tps, 100 * r.share(), r.roofline_tps(), r.bandwidth / 1e9, bytes(r.bytes_per_token)), ""};
 }},
{"roofline", "roofline.fits-in-cache", Status::kNote,
 "a token's bytes fit in the CPU's last-level cache",
 "the model is small enough to stay in the CPU cache: per-token overhead and compute, not memory bandwidth, bound it",
 "none; the memory roofline applies to models larger than the cache",
 [](const Observations& o) -> Fire {
   const auto& r = *o.roofline;
   if (!r.fits_in_cache()) return {};
   return Finding{fmt::format("{:.1f} tok/s = {:.0f}% of the roofline {:.1f} tok/s ({:.1f} GB/s ÷ {}/token); {}/token fits "
                              "the {} last-level cache",
                              r.measured_tps, 100 * r.share(), r.roofline_tps(), r.bandwidth / 1e9, bytes(r.bytes_per_token),
                              bytes(r.bytes_per_token), bytes(r.llc_bytes)), ""};
 }},
{"roofline", "roofline.below", Status::kProblem,
 "decode reaches less than 60% of the roofline",
 "decode is not bandwidth-bound: compute, per-step overhead or contention limits it",
 "read the backend and contention lines; compare with `headroom bench` (compute figures)",
 [](const Observations& o) -> Fire {
   const auto& r = *o.roofline;
   if (r.share() >= kBandwidthBoundShare || r.fits_in_cache()) return {};
   return Finding{fmt::format("{:.1f} tok/s = {:.0f}% of the roofline {:.1f} tok/s ({:.1f} GB/s measured now ÷ {}/token)",
                              r.measured_tps, 100 * r.share(), r.roofline_tps(), r.bandwidth / 1e9, bytes(r.bytes_per_token)), ""};
 }},

// ── endpoint: an OpenAI-compatible server, single vs. concurrent ─────────────────────────────
{"endpoint", "endpoint.errors", Status::kProblem,
 "requests to the endpoint failed",
 "the server refused or broke requests (overload, wrong model name, or a crash)",
 "read the server's log; retry with fewer concurrent requests",
 [](const Observations& o) -> Fire {
   const auto& e = *o.endpoint;
   if (e.errors == 0) return {};
   return Finding{fmt::format("{}: {} failed requests; first: {}", e.url, e.errors, e.first_error), ""};
 }},
{"endpoint", "endpoint.serialized", Status::kProblem,
 "concurrent requests barely add throughput and wait longer for their first token",
 "the server runs one request at a time (no parallel slots / continuous batching)",
 "enable parallel slots on the server (e.g. headroom serve --slots 4, llama-server -np 4)",
 [](const Observations& o) -> Fire {
   const auto& e = *o.endpoint;
   if (e.concurrent_tps >= kEndpointBatchGain * e.single_tps || e.concurrent_ttft_p50 < 2 * e.single_ttft) return {};
   return Finding{fmt::format("{}: one stream {:.1f} tok/s, first token {}; {} streams {:.1f} tok/s in total, first token "
                              "{} (median)",
                              e.url, e.single_tps, ms(e.single_ttft), e.n_concurrent, e.concurrent_tps,
                              ms(e.concurrent_ttft_p50)), ""};
 }},
{"endpoint", "endpoint.ok", Status::kOk,
 "concurrent requests add throughput",
 "the server batches concurrent requests",
 "none",
 [](const Observations& o) -> Fire {
   const auto& e = *o.endpoint;
   return Finding{fmt::format("{}: one stream {:.1f} tok/s, first token {}; {} streams {:.1f} tok/s in total, first token "
                              "{} (median)",
                              e.url, e.single_tps, ms(e.single_ttft), e.n_concurrent, e.concurrent_tps,
                              ms(e.concurrent_ttft_p50)), ""};
 }},
};
// clang-format on

const std::string* not_run(const Observations& o, std::string_view check) {
  auto why = [](const auto& probe) { return probe.ran() ? nullptr : &probe.not_run; };
  if (check == "placement") return why(o.placement);
  if (check == "budget") return why(o.budget);
  if (check == "backend") return why(o.backend);
  if (check == "partial offload") return why(o.offload);
  if (check == "kv growth") return why(o.kv_growth);
  if (check == "memory pressure") return why(o.memory);
  if (check == "contention") return why(o.contention);
  if (check == "throttling") return why(o.throttle);
  if (check == "roofline") return why(o.roofline);
  if (check == "endpoint") return why(o.endpoint);
  return nullptr;
}

}  // namespace

std::string_view status_name(Status status) {
  switch (status) {
    case Status::kOk:
      return "ok";
    case Status::kNote:
      return "note";
    case Status::kProblem:
      return "problem";
    case Status::kNotRun:
      return "not run";
  }
  return "?";
}

const std::vector<std::string_view>& checks() {
  static const std::vector<std::string_view> names = {
      "placement",       "budget",     "backend",    "partial offload", "kv growth",
      "memory pressure", "contention", "throttling", "roofline",        "endpoint"};
  return names;
}

const std::vector<Rule>& rules() {
  return kRules;
}

std::vector<Verdict> diagnose(const Observations& obs) {
  std::vector<Verdict> out;
  for (std::string_view check : checks()) {
    if (const std::string* why = not_run(obs, check)) {
      out.push_back({std::string(check), std::string(check) + ".not-run", Status::kNotRun,
                     "not run", *why, ""});
      continue;
    }
    auto verdict = [&](const Rule& r, const Finding& f) {
      std::string action(r.action);
      if (!f.action_detail.empty()) action += ": " + f.action_detail;
      return Verdict{std::string(check), std::string(r.id),    r.status,
                     f.observation,      std::string(r.cause), action};
    };
    bool problem = false;
    for (const Rule& r : kRules) {
      if (r.check != check || r.status != Status::kProblem) continue;
      if (auto f = r.fires(obs)) {
        out.push_back(verdict(r, *f));
        problem = true;
      }
    }
    if (problem) continue;
    for (const Rule& r : kRules) {
      if (r.check != check || r.status == Status::kProblem) continue;
      if (auto f = r.fires(obs)) {
        out.push_back(verdict(r, *f));
        break;
      }
    }
  }
  return out;
}

}  // namespace doctor
