// /proc readers for the memory and contention probes, and the background sampler.
#include "doctor/system_probes.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/memory.h"

namespace doctor {
namespace {

// "Key:   123 kB" lines of /proc/meminfo, in bytes.
std::map<std::string, uint64_t> read_meminfo() {
  std::map<std::string, uint64_t> values;
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    if (!key.empty() && key.back() == ':') key.pop_back();
    values[key] = kib * 1024;
    in.ignore(64, '\n');
  }
  return values;
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

MemorySample sample_memory(std::span<const std::span<const uint8_t>> weights) {
  MemorySample s;
  s.rss = util::process_rss();
  auto meminfo = read_meminfo();
  s.mem_available = meminfo["MemAvailable"];
  s.mem_total = meminfo["MemTotal"];
  const uint64_t swap_total = meminfo["SwapTotal"], swap_free = meminfo["SwapFree"];
  s.swap_used = swap_total > swap_free ? swap_total - swap_free : 0;
  std::string name;
  std::vector<std::string> fields;
  if (parse_stat(read_all("/proc/self/stat"), name, fields))
    s.major_faults = field(fields, kMajorFaults);
  for (const auto& w : weights) {
    s.weights_bytes += w.size();
    s.weights_resident += std::min<uint64_t>(w.size(), util::resident_bytes(w.data(), w.size()));
  }
  return s;
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
