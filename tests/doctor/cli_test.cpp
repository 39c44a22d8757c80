// `headroom doctor` end to end on the shipped stories260K: the real probes, a CPU hog for
// contention, a what-if GPU for partial offload, an unreachable endpoint.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sstream>

#include <nlohmann/json.hpp>

#include "testing/testing.h"

extern char** environ;

namespace {

nlohmann::json doctor_json(const std::string& args) {
  std::string out, err;
  EXPECT_EQ(testing_util::run_command(testing_util::headroom_binary().string() + " doctor --json " + args, &out, &err), 0)
      << err;
  return nlohmann::json::parse(out);
}

nlohmann::json verdict_of(const nlohmann::json& report, const std::string& check) {
  for (const auto& v : report["verdicts"]) {
    if (v["check"] == check) return v;
  }
  return nullptr;
}

bool fired(const nlohmann::json& report, const std::string& rule) {
  for (const auto& v : report["verdicts"]) {
    if (v["rule"] == rule) return true;
  }
  return false;
}

TEST(DoctorCli, RunsEveryCheckOnTheShippedModel) {
  const auto report = doctor_json("");
  EXPECT_LT(report["seconds"].get<double>(), 30);
  for (const char* check : {"placement", "budget", "backend", "partial offload", "kv growth", "memory pressure",
                            "contention", "throttling", "roofline", "endpoint"}) {
    EXPECT_FALSE(verdict_of(report, check).is_null()) << check;
  }
  const auto& obs = report["observations"];
  // Measured, not guessed: two depths, samples, a bandwidth, two stream counts.
  EXPECT_GT(obs["kv_growth"]["tps_short"].get<double>(), 0);
  EXPECT_GT(obs["kv_growth"]["tps_long"].get<double>(), 0);
  EXPECT_GT(obs["kv_growth"]["long_depth"].get<int>(), obs["kv_growth"]["short_depth"].get<int>());
  EXPECT_GE(obs["memory"]["samples"].size(), 1u);
  EXPECT_GT(obs["roofline"]["bandwidth"].get<double>(), 0);
  EXPECT_GT(obs["contention"]["single_tps"].get<double>(), 0);
  EXPECT_GT(obs["contention"]["concurrent_tps"].get<double>(), 0);
  // Healthy on a CPU: no GPU to offload to, the right kernels, nothing swapped.
  EXPECT_EQ(verdict_of(report, "partial offload")["status"], "not run");
  EXPECT_NE(verdict_of(report, "partial offload")["cause"].get<std::string>().find("--assume-gpu"), std::string::npos);
  EXPECT_EQ(verdict_of(report, "endpoint")["status"], "not run");
  EXPECT_EQ(verdict_of(report, "backend")["rule"], "backend.ok");
  EXPECT_EQ(verdict_of(report, "budget")["rule"], "budget.fits");
  EXPECT_EQ(verdict_of(report, "placement")["rule"], "placement.cpu-only");
  if (obs["backend"]["gpu_hardware"].get<std::string>().empty()) {
    EXPECT_EQ(verdict_of(report, "throttling")["status"], "not run");
    EXPECT_NE(verdict_of(report, "throttling")["cause"].get<std::string>().find("no GPU: not applicable"),
              std::string::npos);
  }
  // The contention verdict follows from what was measured (this machine may be busy).
  const auto& c = obs["contention"];
  const bool busy = c["other_cpus"].get<double>() >= 0.5 &&
                    c["threads"].get<int>() + c["other_cpus"].get<double>() > c["n_cpus"].get<int>() + 0.25;
  EXPECT_EQ(fired(report, "contention.other-processes"), busy);
}

TEST(DoctorCli, ACpuHogIsNamedAsContention) {
  const int n_cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  std::vector<pid_t> hogs;
  for (int i = 0; i < n_cpus; ++i) {
    pid_t pid = 0;
    const char* argv[] = {"sh", "-c", "while :; do :; done", nullptr};
    ASSERT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    hogs.push_back(pid);
  }
  const auto report = doctor_json("--ctx 512");
  for (pid_t pid : hogs) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  EXPECT_TRUE(fired(report, "contention.other-processes")) << report["observations"]["contention"].dump();
  const auto v = verdict_of(report, "contention");
  EXPECT_NE(v["observation"].get<std::string>().find("sh (pid"), std::string::npos) << v;
  EXPECT_NE(v["action"].get<std::string>().find("--threads"), std::string::npos);
  // Contention is not mistaken for a wrong backend or a budget problem.
  EXPECT_FALSE(fired(report, "backend.reference"));
  EXPECT_FALSE(fired(report, "budget.does-not-fit"));
}

TEST(DoctorCli, PartialOffloadOnAWhatIfGpuIsPredictedAndMeasured) {
  const auto report = doctor_json("--ctx 256 --assume-gpu 64M@300 --cpu-layers 3");
  EXPECT_TRUE(fired(report, "placement.weights-spill"));
  EXPECT_TRUE(fired(report, "offload.cliff"));
  EXPECT_FALSE(fired(report, "placement.kv-on-host"));
  const auto& f = report["observations"]["partial_offload"];
  EXPECT_EQ(f["n_cpu_layers"], 3);
  EXPECT_TRUE(f["simulated_gpu"].get<bool>());
  EXPECT_GT(f["predicted_cpu_seconds"].get<double>(), 0);
  EXPECT_GT(f["measured_cpu_seconds"].get<double>(), 0);  // this CPU's time for those layers
  EXPECT_NE(verdict_of(report, "partial offload")["action"].get<std::string>().find("--cpu-layers 0"), std::string::npos);
}

TEST(DoctorCli, AnUnreachableEndpointIsSaidSo) {
  const auto report = doctor_json("--ctx 128 --endpoint http://127.0.0.1:1");
  const auto v = verdict_of(report, "endpoint");
  EXPECT_EQ(v["status"], "not run");
  EXPECT_NE(v["cause"].get<std::string>().find("could not complete one request at http://127.0.0.1:1"),
            std::string::npos)
      << v["cause"];
}

TEST(DoctorCli, TheReportNamesEveryCheckWithinAHundredColumnsOrAsATable) {
  std::string out, err;
  ASSERT_EQ(testing_util::run_command(testing_util::headroom_binary().string() + " doctor --ctx 128", &out, &err), 0)
      << err;
  for (const char* check : {"placement", "budget", "backend", "partial offload", "kv growth",
                            "memory pressure", "contention", "throttling", "roofline", "endpoint"})
    EXPECT_NE(out.find(std::string("\n") + check + " "), std::string::npos) << check << "\n" << out;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    size_t columns = 0;
    for (unsigned char c : line) columns += (c & 0xC0) != 0x80;
    // A path or URL longer than a line stays whole; nothing the doctor writes is that long here.
    EXPECT_LE(columns, 100u) << line;
  }
  EXPECT_NE(err.find("doctor: decoding"), std::string::npos) << "progress on stderr: " << err;
  ASSERT_EQ(
      testing_util::run_command(
          testing_util::headroom_binary().string() + " doctor --ctx 128 --markdown", &out, &err),
      0)
      << err;
  EXPECT_NE(out.find("| check | verdict | observation (measured) | likely cause | action |"), std::string::npos);
  EXPECT_NE(out.find("| roofline |"), std::string::npos);
  std::string bad_out, bad_err;
  EXPECT_EQ(testing_util::run_command(testing_util::headroom_binary().string() + " doctor -m /nonexistent.gguf",
                                      &bad_out, &bad_err),
            2);
  EXPECT_NE(bad_err.find("/nonexistent.gguf"), std::string::npos) << bad_err;
}

}  // namespace
