// /proc readers for the memory and contention probes, and the background sampler.
#include "doctor/system_probes.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/memory.h"
#include "util/page_cache.h"

namespace doctor {
namespace {

// "Key:   123 kB" lines (/proc/meminfo, /proc/PID/status), in bytes; other lines are skipped.
std::map<std::string, uint64_t> read_kib_fields(const std::string& path) {
  std::map<std::string, uint64_t> values;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || line.find(" kB") == std::string::npos) continue;
    values[line.substr(0, colon)] = std::strtoull(line.c_str() + colon + 1, nullptr, 10) * 1024;
  }
  return values;
}

uint64_t value_or_zero(const std::map<std::string, uint64_t>& values, const std::string& key) {
  const auto it = values.find(key);
  return it == values.end() ? 0 : it->second;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The name and the fields after it of /proc/<pid>/stat (the name may hold spaces and parens).
bool parse_stat(const std::string& text, std::string& name, std::vector<std::string>& fields) {
  const auto open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  name = text.substr(open + 1, close - open - 1);
  std::istringstream ss(text.substr(close + 1));
  fields.clear();
  for (std::string f; ss >> f;) fields.push_back(f);
  return fields.size() > 12;
}

// Fields after the name: [0] is the state (field 3 of proc(5)), so field k is [k - 3].
constexpr int kMajorFaults = 12 - 3, kUserTime = 14 - 3, kSystemTime = 15 - 3;

uint64_t field(const std::vector<std::string>& f, int i) {
  return std::strtoull(f[i].c_str(), nullptr, 10);
}

}  // namespace

ResidencyTracker::ResidencyTracker(std::vector<std::span<const uint8_t>> weights) {
  // Tensors share pages at their edges: widen each to whole pages and merge, so a page is
  // counted once.
  const uintptr_t page = util::page_size();
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  for (const auto& w : weights) {
    if (w.empty()) continue;
    const auto begin = reinterpret_cast<uintptr_t>(w.data());
    spans.push_back({begin / page * page, (begin + w.size() + page - 1) / page * page});
  }
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<uintptr_t, uintptr_t>> merged;
  for (const auto& [begin, end] : spans) {
    if (!merged.empty() && begin <= merged.back().second)
      merged.back().second = std::max(merged.back().second, end);
    else
      merged.push_back({begin, end});
  }
  for (const auto& [begin, end] : merged)
    pages_.push_back({reinterpret_cast<const uint8_t*>(begin), end - begin});
  was_resident_.resize(pages_.size());
}

void ResidencyTracker::sample(MemorySample& s) {
  const uint64_t page = util::page_size();
  for (size_t r = 0; r < pages_.size(); ++r) {
    auto now = util::resident_map(pages_[r]);
    if (!now) continue;
    s.weights_bytes += pages_[r].size();
    auto& before = was_resident_[r];
    for (size_t i = 0; i < now->size(); ++i) {
      s.weights_resident += (*now)[i] * page;
      if (!before.empty() && before[i] && !(*now)[i]) evicted_ += page;
    }
    before = std::move(*now);
  }
  s.weights_evicted = evicted_;
}

MemorySample sample_memory(ResidencyTracker& weights) {
  MemorySample s;
  s.rss = util::process_rss();
  const auto status = read_kib_fields("/proc/self/status");
  s.rss_anon = value_or_zero(status, "RssAnon");
  s.rss_file = value_or_zero(status, "RssFile");
  auto meminfo = read_kib_fields("/proc/meminfo");
  s.mem_available = meminfo["MemAvailable"];
  s.mem_total = meminfo["MemTotal"];
  const uint64_t swap_total = meminfo["SwapTotal"], swap_free = meminfo["SwapFree"];
  s.swap_used = swap_total > swap_free ? swap_total - swap_free : 0;
  std::string name;
  std::vector<std::string> fields;
  if (parse_stat(read_all("/proc/self/stat"), name, fields))
    s.major_faults = field(fields, kMajorFaults);
  weights.sample(s);
  return s;
}

std::vector<ProcessMemory> memory_holders(size_t n) {
  std::vector<ProcessMemory> holders;
  const int self = ::getpid();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid_text = entry.path().filename().string();
    if (pid_text.empty() || !std::all_of(pid_text.begin(), pid_text.end(), ::isdigit)) continue;
    const int pid = std::atoi(pid_text.c_str());
    if (pid == self) continue;
    // A process may exit between the listing and the read: then it holds nothing.
    std::ifstream in(entry.path() / "status");
    std::string line, name;
    uint64_t rss = 0;
    while (std::getline(in, line)) {
      if (line.rfind("Name:", 0) == 0) name = line.substr(line.find_first_not_of(" \t", 5));
      if (line.rfind("VmRSS:", 0) == 0) rss = std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
    }
    if (rss > 0) holders.push_back({fmt::format("{} (pid {})", name, pid), rss});
  }
  std::sort(holders.begin(), holders.end(),
            [](const auto& a, const auto& b) { return a.rss > b.rss; });
  if (holders.size() > n) holders.resize(n);
  return holders;
}

CpuSnapshot cpu_snapshot() {
  CpuSnapshot s;
  s.ticks = util::cpu_ticks();
  const int self = ::getpid();
  std::error_code ec;
  std::string name;
  std::vector<std::string> fields;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid_text = entry.path().filename().string();
    if (pid_text.empty() || !std::all_of(pid_text.begin(), pid_text.end(), ::isdigit)) continue;
    if (!parse_stat(read_all(entry.path().string() + "/stat"), name, fields)) continue;
    const uint64_t ticks = field(fields, kUserTime) + field(fields, kSystemTime);
    const int pid = std::atoi(pid_text.c_str());
    if (pid != self) s.processes[pid] = {name, ticks};
  }
  return s;
}

void fill_cpu_use(const CpuSnapshot& before, const CpuSnapshot& after, ContentionFacts& facts) {
  const double seconds =
      std::chrono::duration<double>(after.ticks.when - before.ticks.when).count();
  const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  facts.n_cpus = online_cpus();
  if (seconds <= 0) return;
  auto cpus = [&](uint64_t ticks) { return static_cast<double>(ticks) / hz / seconds; };
  facts.other_cpus = util::other_busy_cpus(before.ticks, after.ticks);
  facts.steal_cpus = cpus(after.ticks.steal - before.ticks.steal);
  facts.busiest.clear();
  for (const auto& [pid, entry] : after.processes) {
    const auto it = before.processes.find(pid);
    const uint64_t was = it != before.processes.end() ? it->second.second : 0;
    const double used = cpus(entry.second - std::min(was, entry.second));
    if (used >= 0.05) facts.busiest.push_back({fmt::format("{} (pid {})", entry.first, pid), used});
  }
  std::sort(facts.busiest.begin(), facts.busiest.end(),
            [](const auto& a, const auto& b) { return a.cpus > b.cpus; });
  if (facts.busiest.size() > 5) facts.busiest.resize(5);
  std::ifstream("/proc/loadavg") >> facts.loadavg_1m;
}

int online_cpus() {
  return std::max(1, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
}

Sampler::Sampler(std::vector<std::span<const uint8_t>> weights, GpuTelemetry* gpu,
                 std::chrono::milliseconds interval)
    : weights_(std::move(weights)), gpu_(gpu), interval_(interval) {
  thread_ = std::thread([this] { run(); });
}

Sampler::~Sampler() {
  stop();
}

void Sampler::run() {
  const auto start = std::chrono::steady_clock::now();
  const bool gpu = gpu_ && gpu_->unavailable().empty();
  while (true) {
    MemorySample s = sample_memory(weights_);
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::vector<GpuSample> g = gpu ? gpu_->read() : std::vector<GpuSample>{};
    {
      std::lock_guard lock(mutex_);
      memory_.push_back(s);
      gpu_samples_.insert(gpu_samples_.end(), g.begin(), g.end());
    }
    // Sleep in short steps so stop() returns quickly.
    for (auto slept = std::chrono::milliseconds(0); slept < interval_;
         slept += std::chrono::milliseconds(5)) {
      if (stop_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

std::pair<std::vector<MemorySample>, std::vector<GpuSample>> Sampler::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  return {memory_, gpu_samples_};
}

}  // namespace doctor
