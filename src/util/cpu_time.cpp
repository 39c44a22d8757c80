#include "util/cpu_time.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace util {

CpuTicks cpu_ticks() {
  CpuTicks t;
  t.when = std::chrono::steady_clock::now();
  {
    std::ifstream in("/proc/stat");
    std::string cpu;
    uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    t.busy = user + nice + system + irq + softirq + steal;
    t.steal = steal;
  }
  // /proc/self/stat: utime and stime are fields 14 and 15, counted after the parenthesized name.
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream ss(text.substr(close + 1));
    std::string skipped;
    for (int field = 3; field < 14; ++field) ss >> skipped;  // state … cmajflt
    uint64_t utime = 0, stime = 0;
    ss >> utime >> stime;
    t.self = utime + stime;
  }
  return t;
}

double other_busy_cpus(const CpuTicks& before, const CpuTicks& after) {
  const double seconds = std::chrono::duration<double>(after.when - before.when).count();
  if (seconds <= 0) return 0;
  const uint64_t busy = after.busy - before.busy, self = after.self - before.self;
  return static_cast<double>(busy > self ? busy - self : 0) /
         static_cast<double>(::sysconf(_SC_CLK_TCK)) / seconds;
}

}  // namespace util
