// The doctor's /proc and mincore probes on this machine: the processes holding RAM, and which of a
// mapped file's pages were evicted as opposed to read for the first time.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include "doctor/system_probes.h"
#include "testing/testing.h"
#include "util/memory.h"
#include "util/page_cache.h"

namespace doctor {
namespace {

using testing_util::kMiB;

// A child process that holds `bytes` of touched anonymous memory until killed. Its RSS also counts
// the pages it shares with this process (at most this process's RSS at the fork: larger under
// ASan).
class MemoryHolder {
 public:
  MemoryHolder(const char* name, size_t bytes) : shared_(util::process_rss()) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    pid_ = ::fork();
    if (pid_ == 0) {  // only async-signal-safe calls from here: the parent has threads
      ::prctl(PR_SET_NAME, name);
      void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) ::_exit(1);
      std::memset(p, 1, bytes);
      const char c = 1;
      if (::write(ready[1], &c, 1) != 1) ::_exit(1);
      while (true) ::pause();
    }
    ::close(ready[1]);
    char c = 0;
    EXPECT_EQ(::read(ready[0], &c, 1), 1) << "the child could not allocate";
    ::close(ready[0]);
  }
  ~MemoryHolder() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  uint64_t shared() const { return shared_; }

 private:
  uint64_t shared_;
  pid_t pid_ = -1;
};

TEST(DoctorSystemProbes, AProcessHolding200MiBIsNamedWithItsSize) {
  MemoryHolder holder("hold200mib", 200 * kMiB);
  const auto holders = memory_holders(std::numeric_limits<size_t>::max());
  const std::string name = "hold200mib (pid " + std::to_string(holder.pid()) + ")";
  const auto it = std::find_if(holders.begin(), holders.end(),
                               [&](const ProcessMemory& p) { return p.name == name; });
  ASSERT_NE(it, holders.end()) << "not listed: " << name;
  EXPECT_GE(it->rss, 200 * kMiB);
  EXPECT_LT(it->rss, 240 * kMiB + holder.shared());
  EXPECT_TRUE(std::is_sorted(holders.begin(), holders.end(),
                             [](const auto& a, const auto& b) { return a.rss > b.rss; }));
  // This process is not "another process".
  const std::string self = "(pid " + std::to_string(::getpid()) + ")";
  for (const auto& p : holders) EXPECT_EQ(p.name.find(self), std::string::npos) << p.name;
  // Asked for the largest few, the list is cut, largest first. (Other processes' RSS moves between
  // two reads of /proc, so the two lists are not compared entry by entry.)
  const auto top = memory_holders(2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_GE(top[0].rss, top[1].rss);
  EXPECT_GE(top[0].rss, 200 * kMiB) << "the holder's 200 MiB, at least, is among them";
}

// A file of `pages` pages mapped read-only, dropped from the page cache first.
class ColdMapping {
 public:
  explicit ColdMapping(size_t pages) : bytes_(pages * util::page_size()) {
    path_ = (testing_util::temp_dir() / "weights.bin").string();
    std::ofstream(path_, std::ios::binary) << std::string(bytes_, 'w');
    EXPECT_TRUE(util::drop_from_page_cache(path_).ok());
    fd_ = ::open(path_.c_str(), O_RDONLY);
    data_ = static_cast<const uint8_t*>(::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, fd_, 0));
    EXPECT_NE(data_, MAP_FAILED);
  }
  ~ColdMapping() {
    ::munmap(const_cast<uint8_t*>(data_), bytes_);
    ::close(fd_);
  }
  std::span<const uint8_t> bytes() const { return {data_, bytes_}; }
  // Reads one byte of each page in [first, last).
  void read(size_t first, size_t last) {
    for (size_t p = first; p < last; ++p) sum_ = sum_ + data_[p * util::page_size()];
  }
  // Unmaps this process's copy of the pages and drops them from the page cache: an eviction.
  void evict() {
    ::madvise(const_cast<uint8_t*>(data_), bytes_, MADV_DONTNEED);
    EXPECT_TRUE(util::drop_from_page_cache(path_).ok());
  }

 private:
  std::string path_;
  size_t bytes_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  volatile unsigned sum_ = 0;
};

TEST(DoctorSystemProbes, FirstReadsOfAColdFileAreNotEvictionsButPagesThatLeaveAre) {
  ColdMapping file(256);
  const auto all = file.bytes();
  // Overlapping tensors that share pages are counted once.
  ResidencyTracker tracker({all.subspan(0, 100), all.subspan(50, all.size() - 50)});
  MemorySample s;
  tracker.sample(s);
  EXPECT_EQ(s.weights_bytes, all.size());
  const uint64_t cold = s.weights_resident;
  EXPECT_LT(cold, all.size() / 2) << "the page cache kept the dropped file";
  for (size_t upto : {64, 128, 256}) {  // read lazily, a part at a time
    file.read(0, upto);
    s = {};
    tracker.sample(s);
    EXPECT_GE(s.weights_resident, upto * util::page_size());
    EXPECT_EQ(s.weights_evicted, 0u) << "a first read counted as an eviction";
  }
  file.evict();
  s = {};
  tracker.sample(s);
  if (s.weights_resident == all.size()) GTEST_SKIP() << "the kernel kept the pages";
  EXPECT_EQ(s.weights_evicted, all.size() - s.weights_resident);
  // Read back, they are resident again; the evictions stay counted.
  const uint64_t evicted = s.weights_evicted;
  file.read(0, 256);
  s = {};
  tracker.sample(s);
  EXPECT_EQ(s.weights_resident, all.size());
  EXPECT_EQ(s.weights_evicted, evicted);
}

}  // namespace
}  // namespace doctor
