// The CPU bandwidth figure the plan uses: cached with when and under what load it was taken, and
// measured again whenever it no longer holds. And the CPU's last-level cache, from sysfs or CPUID.
#include "plan/devices.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace plan {
namespace {

namespace fs = std::filesystem;

// Points $XDG_CACHE_HOME at an empty folder for one test.
class BandwidthCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* old = std::getenv("XDG_CACHE_HOME")) saved_ = old;
    dir_ = fs::temp_directory_path() /
           ("headroom-bw-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    ::setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_.empty())
      ::unsetenv("XDG_CACHE_HOME");
    else
      ::setenv("XDG_CACHE_HOME", saved_.c_str(), 1);
    fs::remove_all(dir_);
  }
  fs::path file() const { return dir_ / "headroom" / "cpu-bandwidth.json"; }
  nlohmann::json read() const {
    std::ifstream in(file());
    return nlohmann::json::parse(in);
  }
  void write(const nlohmann::json& j) const { std::ofstream(file()) << j.dump(); }

  // Caches a quiet, fresh figure of `bytes_per_second` (a value no probe would measure), so a
  // call that returns it used the cache and one that does not measured again.
  nlohmann::json seed(double bytes_per_second) {
    std::string source;
    cpu_bandwidth(kThreads, &source);  // writes a record with this machine's conditions
    nlohmann::json cache = read();
    cache[key()]["bytes_per_second"] = bytes_per_second;
    cache[key()]["other_cpus_busy"] = 0.0;
    write(cache);
    return cache;
  }
  static std::string key() { return std::to_string(kThreads); }
  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  static constexpr int kThreads = 1;
  static constexpr double kSentinel = 1234567.0;  // 1.2 MB/s: no RAM is this slow
  std::string saved_;
  fs::path dir_;
};

TEST_F(BandwidthCache, AFirstCallMeasuresAndRecordsWhenAndUnderWhatLoad) {
  std::string source;
  const double bw = cpu_bandwidth(kThreads, &source);
  EXPECT_GT(bw, 1e8);
  EXPECT_NE(source.find("measured now"), std::string::npos) << source;
  EXPECT_NE(source.find("none was cached"), std::string::npos) << source;
  const nlohmann::json record = read()[key()];
  EXPECT_EQ(record["bytes_per_second"].get<double>(), bw);
  EXPECT_NEAR(record["measured_at"].get<double>(), now(), 60);
  EXPECT_GE(record["other_cpus_busy"].get<double>(), 0);
  EXPECT_EQ(record["conditions"]["threads"], kThreads);
  EXPECT_EQ(record["conditions"]["ram_bytes"], total_ram());
}

TEST_F(BandwidthCache, AFreshQuietFigureIsUsedAndItsAgeSaid) {
  seed(kSentinel);
  std::string source;
  EXPECT_EQ(cpu_bandwidth(kThreads, &source), kSentinel);
  EXPECT_NE(source.find("ago with the CPUs otherwise idle, cached in"), std::string::npos)
      << source;
}

TEST_F(BandwidthCache, AStaleFigureIsMeasuredAgainAndTheReasonSaid) {
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* reason;
  };
  const Case cases[] = {
      {"measured_at", now() - 8 * 86400, "the cached one was 8 days old"},
      {"measured_at", now() + 3600, "the clock moved back"},
      {"other_cpus_busy", 1.5, "taken while other processes kept 1.5 CPUs busy"},
      {"beaten_by", 2 * kSentinel, "a run read"},
      {"bytes_per_second", "fast", "damaged"},
  };
  for (const Case& c : cases) {
    nlohmann::json cache = seed(kSentinel);
    cache[key()][c.field] = c.value;
    write(cache);
    std::string source;
    EXPECT_NE(cpu_bandwidth(kThreads, &source), kSentinel) << c.field;
    EXPECT_NE(source.find("re-measured because"), std::string::npos) << source;
    EXPECT_NE(source.find(c.reason), std::string::npos) << source;
  }
}

TEST_F(BandwidthCache, AnotherMachinesFigureIsNotUsed) {
  for (const char* condition : {"cpu", "kernel"}) {
    nlohmann::json cache = seed(kSentinel);
    cache[key()]["conditions"][condition] = "another one";
    write(cache);
    std::string source;
    EXPECT_NE(cpu_bandwidth(kThreads, &source), kSentinel) << condition;
    EXPECT_NE(source.find("the CPU, kernel or RAM changed"), std::string::npos) << source;
  }
}

TEST_F(BandwidthCache, ARunFasterThanTheFigureMarksItStale) {
  seed(kSentinel);
  report_cpu_bandwidth_achieved(kThreads, kSentinel / 2);  // slower: the figure holds
  EXPECT_FALSE(read()[key()].contains("beaten_by"));
  report_cpu_bandwidth_achieved(kThreads, 3 * kSentinel);
  EXPECT_EQ(read()[key()]["beaten_by"].get<double>(), 3 * kSentinel);
  std::string source;
  EXPECT_NE(cpu_bandwidth(kThreads, &source), kSentinel);
  EXPECT_NE(source.find("a run read"), std::string::npos) << source;
}

TEST_F(BandwidthCache, AFigureTakenUnderLoadDoesNotReplaceAQuietOne) {
  seed(kSentinel);
  remember_cpu_bandwidth(kThreads, {.bytes_per_second = 5e9, .other_cpus_busy = 1.0});
  EXPECT_EQ(read()[key()]["bytes_per_second"].get<double>(), kSentinel);
  remember_cpu_bandwidth(kThreads, {.bytes_per_second = 5e9, .other_cpus_busy = 0.1});
  EXPECT_EQ(read()[key()]["bytes_per_second"].get<double>(), 5e9);
}

TEST_F(BandwidthCache, ADamagedFileIsMeasuredAgain) {
  fs::create_directories(file().parent_path());
  std::ofstream(file()) << "{not json";
  std::string source;
  EXPECT_GT(cpu_bandwidth(kThreads, &source), 1e8);
  EXPECT_NE(source.find("none was cached"), std::string::npos) << source;
  EXPECT_TRUE(read().contains(key()));
}

TEST_F(BandwidthCache, AReaderNeverSeesAHalfWrittenFile) {
  seed(kSentinel);
  std::atomic<bool> done{false};
  std::thread writer([&] {  // another headroom rewriting the figure, over and over
    while (!done) remember_cpu_bandwidth(kThreads, {.bytes_per_second = kSentinel});
  });
  int reads = 0;
  std::string source;
  for (; reads < 3000; ++reads) {
    if (cpu_bandwidth(kThreads, &source) != kSentinel) break;
  }
  done = true;
  writer.join();
  EXPECT_EQ(reads, 3000) << "read " << reads << " times, then: " << source;
}

// The largest cache level sysfs lists, read here on its own: the independent truth CPUID must
// agree with where sysfs speaks.
uint64_t sysfs_largest_cache() {
  uint64_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const fs::path dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
    int level = 0;
    std::string size;
    if (!(std::ifstream(dir / "level") >> level) || !(std::ifstream(dir / "size") >> size))
      continue;
    const uint64_t kib = std::stoull(size);  // "2048K"
    if (level > best_level) best_level = level, best = kib << 10;
  }
  return best;
}

TEST(CpuCaches, CpuidAgreesWithSysfsAndFillsInWhereSysfsIsSilent) {
#if defined(__x86_64__)
  const uint64_t cpuid = cpuid_last_level_cache_bytes();
  const uint64_t sysfs = sysfs_largest_cache();
  if (sysfs == 0 && cpuid == 0) {
    // Some VMs hide both (sysfs lists no caches, CPUID's cache leaves are empty): unknown.
    EXPECT_EQ(last_level_cache_bytes(), 0u);
    GTEST_SKIP() << "neither sysfs nor CPUID's cache descriptors describe this CPU's caches";
  }
  EXPECT_GE(cpuid, uint64_t{256} << 10);  // every x86 CPU in use has at least 256 KiB
  if (sysfs > 0) {
    EXPECT_EQ(cpuid, sysfs);
    EXPECT_EQ(last_level_cache_bytes(), sysfs);
  } else {
    EXPECT_EQ(last_level_cache_bytes(), cpuid);
  }
#else
  GTEST_SKIP() << "CPUID is x86 only";
#endif
}

// The measured stand-in for an undescribed cache: a doubling size from 1 to 256 MiB, the largest
// read at 1.5× the given RAM rate; none against a rate nothing reaches, the largest against one
// everything beats, and where the caches are described, no more than twice the largest of them
// (a working set twice the cache cannot stream from it).
TEST(CpuCaches, MeasuredCacheIsTheLargestWorkingSetReadAboveRamRate) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  EXPECT_EQ(measure_cache_bytes(2, 1e15), 0u);
  EXPECT_EQ(measure_cache_bytes(2, 1.0), 256 * kMiB);
  const uint64_t measured = measure_cache_bytes(2, measure_cpu_bandwidth(2, 512 * kMiB));
  EXPECT_TRUE(measured == 0 ||
              (measured >= kMiB && measured <= 256 * kMiB && (measured & (measured - 1)) == 0))
      << measured;
  if (const uint64_t described = last_level_cache_bytes(); described > 0) {
    EXPECT_LE(measured, 2 * described);
  }
}

}  // namespace
}  // namespace plan
