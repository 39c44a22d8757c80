// Device detection: RAM budgets from /proc/meminfo, a cached CPU bandwidth probe, NVIDIA GPUs from
// NVML (loaded at run time), what-if GPUs.
#include "plan/devices.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "telemetry/nvml.h"
#include "util/aligned_buffer.h"
#include "util/cpu_time.h"
#include "util/units.h"

namespace plan {
namespace {

uint64_t meminfo_kib(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream ss(line.substr(key.size() + 1));
      uint64_t kib = 0;
      ss >> kib;
      return kib;
    }
  }
  return 0;
}

std::filesystem::path cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::filesystem::path(xdg) / "headroom";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "headroom";
  return std::filesystem::temp_directory_path() / "headroom";
}

// A GPU NVML reports. Its budget is the driver's free memory (other processes' use already
// subtracted) less a margin; its bandwidth is the peak the memory clock and bus allow (not
// measured yet: a device copy reaches ~90 % of it on an H100, bench/RESULTS.md).
Device gpu_device(const telemetry::GpuReading& g, const DeviceOptions& options) {
  Device gpu;
  gpu.kind = DeviceKind::kGpu;
  gpu.gpu_index = g.index;
  gpu.unusable_reason = options.gpu_backend
                            ? options.gpu_backend(g.index)
                            : "this build runs on the CPU: it has no GPU backend yet";
  gpu.placeable = gpu.unusable_reason.empty();
  gpu.name = fmt::format("cuda:{} {}", g.index, g.name);
  gpu.total_bytes = g.memory_total.value_or(0);
  if (options.gpu_mem) {
    gpu.budget_bytes =
        gpu.total_bytes ? std::min(*options.gpu_mem, gpu.total_bytes) : *options.gpu_mem;
    gpu.budget_source = "--gpu-mem";
  } else if (g.memory_free) {
    const uint64_t margin = gpu_margin_bytes(gpu.total_bytes);
    gpu.budget_bytes = *g.memory_free > margin ? *g.memory_free - margin : 0;
    gpu.budget_source = fmt::format(
        "the driver's free memory {} minus a {} margin (512 MiB or 2% of its memory, the larger, "
        "for the CUDA context)",
        util::format_bytes(*g.memory_free), util::format_bytes(margin));
  } else {
    gpu.budget_source = "none: NVML could not read its memory (give one with --gpu-mem)";
  }
  if (g.max_memory_clock_mhz && g.memory_bus_width_bits) {
    // Double data rate: two transfers per memory clock, bus width bits each.
    gpu.bandwidth = *g.max_memory_clock_mhz * 1e6 * 2 * *g.memory_bus_width_bits / 8;
    gpu.bandwidth_source = fmt::format(
        "peak from NVML: max memory clock {} MHz × 2 (double data rate) × {}-bit bus, not measured",
        *g.max_memory_clock_mhz, *g.memory_bus_width_bits);
  } else {
    gpu.bandwidth_source = "unknown: NVML gives no memory clock or bus width for it";
  }
  const double link = g.max_pcie_generation && g.max_pcie_width
                          ? pcie_link_bandwidth(*g.max_pcie_generation, *g.max_pcie_width)
                          : 0;
  if (link > 0) {
    gpu.link_bandwidth = link;
    gpu.bandwidth_source += fmt::format("; host link PCIe gen {} x{}, {:.1f} GB/s (its maximum)",
                                        *g.max_pcie_generation, *g.max_pcie_width, link / 1e9);
  } else {
    gpu.link_bandwidth = 25e9;  // PCIe 4.0 x16 in practice
    gpu.bandwidth_source += "; host link assumed 25 GB/s (NVML gives no PCIe link)";
  }
  return gpu;
}

}  // namespace

uint64_t available_ram() {
  return meminfo_kib("MemAvailable") * 1024;
}
uint64_t total_ram() {
  return meminfo_kib("MemTotal") * 1024;
}

uint64_t cpu_margin_bytes(uint64_t total) {
  return std::max<uint64_t>(1ull << 30, total / 20);
}

uint64_t gpu_margin_bytes(uint64_t total) {
  // A CUDA context takes a few hundred MiB before the first allocation; the allocator rounds up.
  return std::max<uint64_t>(512ull << 20, total / 50);
}

double pcie_link_bandwidth(unsigned generation, unsigned width) {
  // Per lane per direction: transfers/s × payload share of the line code / 8 bits.
  double lane = 0;
  switch (generation) {
    case 1:
      lane = 2.5e9 * 8 / 10 / 8;
      break;
    case 2:
      lane = 5e9 * 8 / 10 / 8;
      break;
    case 3:
      lane = 8e9 * 128 / 130 / 8;
      break;
    case 4:
      lane = 16e9 * 128 / 130 / 8;
      break;
    case 5:
      lane = 32e9 * 128 / 130 / 8;
      break;
    case 6:
      lane = 64e9 * 242 / 256 / 8;
      break;  // PAM4 with 256-byte FLITs
    default:
      return 0;
  }
  return lane * width;
}

int physical_cores() {
  // Distinct (physical id, core id) pairs; hyperthreads share a core and its memory bandwidth.
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::pair<int, int>> cores;
  int physical = 0;
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0)
      physical = std::atoi(line.substr(line.find(':') + 1).c_str());
    if (line.rfind("core id", 0) == 0)
      cores.insert({physical, std::atoi(line.substr(line.find(':') + 1).c_str())});
  }
  const int logical = static_cast<int>(std::thread::hardware_concurrency());
  if (cores.empty()) return std::max(1, logical);
  return std::max(1, std::min(static_cast<int>(cores.size()), logical));
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      std::string name = line.substr(line.find(':') + 1);
      name.erase(0, name.find_first_not_of(' '));
      return name;
    }
  }
  return "unknown CPU";
}

namespace {

// The largest cache level sysfs lists for CPU 0, or 0 when it lists none (some VMs).
uint64_t sysfs_last_level_cache() {
  uint64_t best = 0;
  int best_level = 0;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator("/sys/devices/system/cpu/cpu0/cache", ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    int level = 0;
    std::ifstream(entry.path() / "level") >> level;
    std::string size;
    std::ifstream(entry.path() / "size") >> size;  // "32768K"
    uint64_t bytes = std::strtoull(size.c_str(), nullptr, 10);
    if (!size.empty() && size.back() == 'K') bytes <<= 10;
    if (!size.empty() && size.back() == 'M') bytes <<= 20;
    if (level > best_level) {
      best_level = level;
      best = bytes;
    }
  }
  return best;
}

}  // namespace

// The same from CPUID's cache descriptors: leaf 4 (Intel) or 0x8000001D (AMD), whose subleaves
// give each cache's level, ways, partitions, line size and sets.
uint64_t cpuid_last_level_cache_bytes() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  for (unsigned leaf : {4u, 0x8000001Du}) {
    if (__get_cpuid_max(leaf & 0x80000000u, nullptr) < leaf) continue;
    uint64_t best = 0;
    unsigned best_level = 0;
    for (unsigned sub = 0; sub < 16; ++sub) {
      __cpuid_count(leaf, sub, a, b, c, d);
      if ((a & 0x1f) == 0) break;     // no more caches
      if ((a & 0x1f) == 2) continue;  // instruction cache
      const unsigned level = (a >> 5) & 7;
      const uint64_t bytes = uint64_t{((b >> 22) & 0x3ff) + 1} * (((b >> 12) & 0x3ff) + 1) *
                             ((b & 0xfff) + 1) * (uint64_t{c} + 1);
      if (level > best_level) {
        best_level = level;
        best = bytes;
      }
    }
    if (best > 0) return best;
  }
#endif
  return 0;
}

uint64_t last_level_cache_bytes() {
  const uint64_t sysfs = sysfs_last_level_cache();
  return sysfs > 0 ? sysfs : cpuid_last_level_cache_bytes();
}

namespace {

// Sums data[begin, end) (multiples of 8 words, 64-byte aligned) with the widest loads this CPU
// has: the kernels stream weights with vector loads, and scalar loads alone read ~30% less per
// second (measured here: 17 GB/s scalar, 22 AVX2, 24 AVX-512, 2 threads).
// Optimized and not instrumented in every build (the sanitized one compiles planning at -O0):
// they read only the probe's own buffer, and checked or unoptimized loads time the CPU instead of
// the memory (a cache-resident read fell to RAM's rate, so the doctor measured no cache).
__attribute__((optimize("O2"), no_sanitize("address", "undefined"))) uint64_t sum_words_scalar(
    const uint64_t* data, size_t begin, size_t end) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = begin; i < end; i += 4) {
    a += data[i];
    b += data[i + 1];
    c += data[i + 2];
    d += data[i + 3];
  }
  return a + b + c + d;
}

#if defined(__x86_64__)
__attribute__((target("avx2"), optimize("O2"), no_sanitize("address", "undefined"))) uint64_t
sum_words_avx2(const uint64_t* data, size_t begin, size_t end) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0;
  for (size_t i = begin; i < end; i += 8) {
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i)));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i + 4)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(s0, s1));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

__attribute__((target("avx512f"), optimize("O2"), no_sanitize("address", "undefined"))) uint64_t
sum_words_avx512(const uint64_t* data, size_t begin, size_t end) {
  __m512i s0 = _mm512_setzero_si512(), s1 = s0;
  size_t i = begin;
  for (; i + 16 <= end; i += 16) {
    s0 = _mm512_add_epi64(s0, _mm512_load_si512(data + i));
    s1 = _mm512_add_epi64(s1, _mm512_load_si512(data + i + 8));
  }
  if (i < end) s0 = _mm512_add_epi64(s0, _mm512_load_si512(data + i));  // one line left
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(s0, s1));
  uint64_t sum = 0;
  for (uint64_t lane : lanes) sum += lane;
  return sum;
}
#endif

uint64_t sum_words(const uint64_t* data, size_t begin, size_t end) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return sum_words_avx512(data, begin, end);
  if (__builtin_cpu_supports("avx2")) return sum_words_avx2(data, begin, end);
#endif
  return sum_words_scalar(data, begin, end);
}

}  // namespace

double measure_cpu_bandwidth(int threads, size_t bytes) {
  threads = std::max(1, threads);
  util::AlignedBuffer buffer(bytes);
  if (!buffer.ok()) return 0;
  const size_t n = bytes / sizeof(uint64_t);
  auto* data = buffer.as<uint64_t>();
  for (size_t i = 0; i < n; i += 512) data[i] = i;  // fault every page in before timing
  // A buffer smaller than this is read again as many times, so that the threads' start is a
  // small part of what is timed.
  constexpr size_t kMinBytesRead = size_t{256} << 20;
  const size_t passes = std::max<size_t>(1, kMinBytesRead / bytes);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<uint64_t> sums(threads);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        // Slices of whole cache lines, so every thread's vector loads stay aligned.
        const size_t lines = n / 8, begin = lines * t / threads * 8,
                     end = lines * (t + 1) / threads * 8;
        for (size_t p = 0; p < passes; ++p) sums[t] += sum_words(data, begin, end);
      });
    }
    for (auto& th : pool) th.join();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    volatile uint64_t sink = 0;
    for (uint64_t v : sums) sink = sink + v;
    best = std::max(best, static_cast<double>(bytes) * passes / s);
  }
  return best;
}

uint64_t measure_cache_bytes(int threads, double ram_bytes_per_second) {
  constexpr double kCacheOverRam = 1.5;
  auto reads_above_ram = [&](uint64_t bytes) {
    return measure_cpu_bandwidth(threads, bytes) >= kCacheOverRam * ram_bytes_per_second;
  };
  // Every CPU caches 1 MiB, so "no cache at all" is confirmed twice, 20 ms apart: another process
  // can only slow a read down, and one disturbed 1 MiB read (caught in a test run) made the doctor
  // judge stories260K against RAM's roofline (roofline.below on a healthy machine). Larger sizes
  // are read once: retrying them would let a disturbed RAM figure pass a size off as cached.
  constexpr uint64_t kFirst = uint64_t{1} << 20;
  bool first_fits = reads_above_ram(kFirst);
  for (int retry = 0; retry < 2 && !first_fits; ++retry) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    first_fits = reads_above_ram(kFirst);
  }
  if (!first_fits) return 0;
  uint64_t fits = kFirst;
  for (uint64_t bytes = 2 * kFirst; bytes <= uint64_t{256} << 20; bytes *= 2) {
    if (!reads_above_ram(bytes)) break;
    fits = bytes;
  }
  return fits;
}

namespace {

// How long a quiet bandwidth figure is trusted, and the other processes' CPU use above which a
// figure is taken to be depressed by them (half a CPU: a build or a second model competing).
constexpr std::chrono::hours kBandwidthMaxAge{24 * 7};
constexpr double kQuietOtherCpus = 0.5;

std::string kernel_release() {
  utsname u{};
  return ::uname(&u) == 0 ? u.release : "unknown kernel";
}

// The machine a figure belongs to: a different CPU, kernel or RAM size voids it.
nlohmann::json machine_conditions(int threads) {
  return {{"cpu", cpu_model_name()},
          {"kernel", kernel_release()},
          {"ram_bytes", total_ram()},
          {"threads", threads}};
}

std::filesystem::path bandwidth_cache_path() {
  return cache_dir() / "cpu-bandwidth.json";
}

nlohmann::json read_bandwidth_cache() {
  if (std::ifstream in(bandwidth_cache_path()); in) {
    try {
      auto cache = nlohmann::json::parse(in);
      if (cache.is_object()) return cache;
    } catch (const std::exception&) {
    }
  }
  return nlohmann::json::object();  // none, or damaged: measured again
}

// Written aside and renamed into place: another headroom reading the cache meanwhile (a server and
// a bench started together) sees the old file or the new one, never a half-written one that
// would cost it a measurement. A failed write leaves the old file as it was.
void write_bandwidth_cache(const nlohmann::json& cache) {
  const auto path = bandwidth_cache_path();
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  static std::atomic<int> writes{0};
  const std::filesystem::path temp =
      fmt::format("{}.{}-{}.tmp", path.string(), ::getpid(), writes++);
  std::ofstream out(temp);
  out << cache.dump(1) << "\n";
  out.close();  // flushed: a full disk fails here
  if (out) std::filesystem::rename(temp, path, ec);
  if (!out || ec) std::filesystem::remove(temp, ec);
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string format_age(int64_t seconds) {
  if (seconds < 120) return fmt::format("{} s", seconds);
  if (seconds < 2 * 3600) return fmt::format("{} min", seconds / 60);
  if (seconds < 2 * 86400) return fmt::format("{} h", seconds / 3600);
  return fmt::format("{} days", seconds / 86400);
}

// Why a cached figure must be measured again, or "" when it still holds.
std::string stale_reason(const nlohmann::json& record, int threads) {
  if (!record.is_object()) return "none was cached";
  try {
    if (record.at("conditions") != machine_conditions(threads))
      return "the CPU, kernel or RAM changed since it was cached";
    const int64_t age = unix_now() - record.at("measured_at").get<int64_t>();
    if (age < 0) return "the clock moved back since it was cached";
    if (age > std::chrono::seconds(kBandwidthMaxAge).count())
      return fmt::format("the cached one was {} old", format_age(age));
    if (const double others = record.at("other_cpus_busy").get<double>(); others > kQuietOtherCpus)
      return fmt::format("the cached one was taken while other processes kept {:.1f} CPUs busy",
                         others);
    if (record.contains("beaten_by"))
      return fmt::format("a run read {:.1f} GB/s, more than the cached {:.1f} GB/s allows",
                         record.at("beaten_by").get<double>() / 1e9,
                         record.at("bytes_per_second").get<double>() / 1e9);
    if (record.at("bytes_per_second").get<double>() <= 0) return "the cached one was not positive";
  } catch (const std::exception&) {
    return "the cached one was damaged";
  }
  return "";
}

std::string probe_conditions(const BandwidthProbe& p) {
  return p.other_cpus_busy > kQuietOtherCpus
             ? fmt::format(
                   "while other processes kept {:.1f} CPUs busy, so it may read low and "
                   "is measured again next time",
                   p.other_cpus_busy)
             : "with the CPUs otherwise idle";
}

}  // namespace

BandwidthProbe probe_cpu_bandwidth(int threads, size_t bytes) {
  const util::CpuTicks before = util::cpu_ticks();
  BandwidthProbe p;
  p.bytes_per_second = measure_cpu_bandwidth(threads, bytes);
  p.other_cpus_busy = util::other_busy_cpus(before, util::cpu_ticks());
  return p;
}

void remember_cpu_bandwidth(int threads, const BandwidthProbe& probe) {
  if (probe.bytes_per_second <= 0) return;
  nlohmann::json cache = read_bandwidth_cache();
  const std::string key = std::to_string(threads);
  // A figure taken under load does not replace a quiet one that still holds.
  if (probe.other_cpus_busy > kQuietOtherCpus && stale_reason(cache[key], threads).empty()) return;
  cache[key] = {{"bytes_per_second", probe.bytes_per_second},
                {"measured_at", unix_now()},
                {"other_cpus_busy", probe.other_cpus_busy},
                {"conditions", machine_conditions(threads)}};
  write_bandwidth_cache(cache);
}

void report_cpu_bandwidth_achieved(int threads, double bytes_per_second) {
  nlohmann::json cache = read_bandwidth_cache();
  const std::string key = std::to_string(threads);
  if (!stale_reason(cache[key], threads).empty()) return;
  if (bytes_per_second <= cache[key]["bytes_per_second"].get<double>()) return;
  cache[key]["beaten_by"] = bytes_per_second;
  write_bandwidth_cache(cache);
}

double cpu_bandwidth(int threads, std::string* source) {
  const nlohmann::json cache = read_bandwidth_cache();
  const std::string key = std::to_string(threads);
  const nlohmann::json record = cache.contains(key) ? cache[key] : nlohmann::json();
  const std::string why = stale_reason(record, threads);
  if (why.empty()) {
    BandwidthProbe cached{record["bytes_per_second"].get<double>(),
                          record["other_cpus_busy"].get<double>()};
    if (source)
      *source = fmt::format("measured {} ago {}, cached in {}",
                            format_age(unix_now() - record["measured_at"].get<int64_t>()),
                            probe_conditions(cached), bandwidth_cache_path().string());
    return cached.bytes_per_second;
  }
  const BandwidthProbe now = probe_cpu_bandwidth(threads, kPlanProbeBytes);
  remember_cpu_bandwidth(threads, now);
  if (source)
    *source =
        fmt::format("measured now ({} threads, {} read, best of 3) {}; re-measured because {}",
                    threads, util::format_bytes(kPlanProbeBytes), probe_conditions(now), why);
  return now.bytes_per_second;
}

util::Result<std::vector<Device>> detect_devices(const DeviceOptions& options) {
  std::vector<Device> devices;
  Device cpu;
  cpu.kind = DeviceKind::kCpu;
  const int threads = options.threads > 0 ? options.threads : physical_cores();
  cpu.name = fmt::format("cpu ({}, {} threads)", cpu_model_name(), threads);
  cpu.total_bytes = total_ram();
  if (options.cpu_mem) {
    cpu.budget_bytes = *options.cpu_mem;
    cpu.budget_source = "--cpu-mem";
  } else {
    const uint64_t avail = available_ram(), margin = cpu_margin_bytes(cpu.total_bytes);
    cpu.budget_bytes = avail > margin ? avail - margin : 0;
    cpu.budget_is_available_ram = true;
    cpu.budget_source =
        fmt::format("available RAM {} minus a {} margin (1 GiB or 5% of RAM, the larger)",
                    util::format_bytes(avail), util::format_bytes(margin));
  }
  if (options.probe) {
    cpu.bandwidth = cpu_bandwidth(threads, &cpu.bandwidth_source);
  } else {
    cpu.bandwidth = 10e9;
    cpu.bandwidth_source = "assumed 10 GB/s (probe disabled)";
  }
  devices.push_back(cpu);

  // Present NVIDIA GPUs. Without NVML (no driver) there are none, and the CPU runs everything.
  if (auto nvml = telemetry::Nvml::open(); nvml) {
    for (const telemetry::GpuReading& g : nvml->read_all(/*pcie_throughput=*/false)) {
      devices.push_back(gpu_device(g, options));
    }
  }

  if (!options.assume_gpu.empty()) {
    // MEM[@BANDWIDTH], e.g. "8G@300" (GB/s). A what-if GPU: nothing is allocated on it.
    Device gpu;
    gpu.kind = DeviceKind::kGpu;
    gpu.simulated = true;
    const auto at = options.assume_gpu.find('@');
    HR_ASSIGN_OR_RETURN(gpu.total_bytes, util::parse_bytes(options.assume_gpu.substr(0, at)));
    double gbps = 300;
    if (at != std::string::npos) {
      char* end = nullptr;
      gbps = std::strtod(options.assume_gpu.c_str() + at + 1, &end);
      if (gbps <= 0 || (end && *end && std::string(end) != "GB/s")) {
        return util::errorf(
            "--assume-gpu '{}': bandwidth must be a positive number of GB/s, e.g. 8G@300",
            options.assume_gpu);
      }
    }
    gpu.name =
        fmt::format("assumed GPU ({}, {:.0f} GB/s)", util::format_bytes(gpu.total_bytes), gbps);
    gpu.budget_bytes =
        options.gpu_mem ? std::min(*options.gpu_mem, gpu.total_bytes) : gpu.total_bytes;
    gpu.budget_source = options.gpu_mem ? "--gpu-mem" : "--assume-gpu";
    gpu.bandwidth = gbps * 1e9;
    gpu.bandwidth_source = "--assume-gpu";
    gpu.link_bandwidth = 25e9;  // PCIe 4.0 x16 in practice
    devices.push_back(gpu);
  }
  return devices;
}

}  // namespace plan
