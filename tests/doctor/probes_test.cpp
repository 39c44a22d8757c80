// The doctor's probes on the shipped stories260K: the real planner forced into partial offload,
// doctor::run with synthetic GPU telemetry, and the endpoint probe against small local servers.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "doctor/doctor.h"
#include "doctor/endpoint_probe.h"
#include "doctor/plan_probes.h"
#include "testing/emulated_gpu.h"
#include "testing/testing.h"

namespace doctor {
namespace {

struct Model {
  std::shared_ptr<gguf::File> file;
  model::Spec spec;
};

Model stories() {
  auto file =
      gguf::File::open((testing_util::source_dir() / "models" / "stories260K.gguf").string());
  EXPECT_TRUE(file.ok());
  Model m{std::make_shared<gguf::File>(std::move(*file)), {}};
  auto spec = model::spec_from_gguf(*m.file);
  EXPECT_TRUE(spec.ok());
  m.spec = std::move(*spec);
  return m;
}

plan::Device cpu_device() {
  return {.name = "cpu",
          .kind = plan::DeviceKind::kCpu,
          .total_bytes = 16ull << 30,
          .budget_bytes = 8ull << 30,
          .bandwidth = 20e9};
}

plan::Device what_if_gpu(uint64_t budget) {
  return {.name = "assumed GPU",
          .kind = plan::DeviceKind::kGpu,
          .total_bytes = budget,
          .budget_bytes = budget,
          .bandwidth = 300e9,
          .link_bandwidth = 25e9,
          .simulated = true};
}

std::set<std::string> problems(const std::vector<Verdict>& verdicts) {
  std::set<std::string> ids;
  for (const auto& v : verdicts) {
    if (v.status == Status::kProblem) ids.insert(v.rule);
  }
  return ids;
}

// The engine is measured where the plan runs it: a what-if GPU is not here, so on the CPU; with
// the emulated GPU standing in for it, on that GPU, whose bandwidth is then the roofline's.
TEST(DoctorProbes, TheEngineIsMeasuredWhereThePlanRunsIt) {
  const Model m = stories();
  auto p = plan::make_plan({*m.file, m.spec, {cpu_device(), what_if_gpu(1ull << 30)}},
                           {.n_ctx = 256, .n_ubatch = 16});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->uses_gpu());
  auto on_cpu = run({.file = m.file, .spec = m.spec, .plan = *p, .n_gen = 16});
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.error().message();
  EXPECT_EQ(on_cpu->run.device.rfind("cpu", 0), 0u) << on_cpu->run.device;
  ASSERT_TRUE(on_cpu->observations.roofline.ran());
  EXPECT_NE(on_cpu->observations.roofline->bandwidth, 300e9);  // measured in RAM

  auto on_gpu = run({.file = m.file,
                     .spec = m.spec,
                     .plan = *p,
                     .gpu_backend = [](int) -> util::Result<std::unique_ptr<kernels::Backend>> {
                       return std::unique_ptr<kernels::Backend>(
                           std::make_unique<testing_util::EmulatedGpu>(2, 16, 4096));
                     },
                     .n_gen = 16});
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.error().message();
  EXPECT_EQ(on_gpu->run.device, "assumed GPU");
  ASSERT_TRUE(on_gpu->observations.roofline.ran());
  EXPECT_EQ(on_gpu->observations.roofline->bandwidth, 300e9);
  EXPECT_GT(on_gpu->observations.roofline->measured_tps, 0);
  EXPECT_EQ(on_gpu->observations.roofline->llc_bytes, 0u);  // no CPU cache bounds a GPU's run
}

TEST(DoctorProbes, AGpuBudgetThatForcesPartialOffloadIsNamedWithItsCost) {
  const Model m = stories();
  const plan::Request request{.n_ctx = 64, .n_ubatch = 16};
  // The GPU budget: everything on the GPU minus half of the weights, so only moving layers to the
  // CPU fits (the KV cache at 64 positions is far smaller than half the weights).
  auto roomy = plan::make_plan({*m.file, m.spec, {cpu_device(), what_if_gpu(1ull << 30)}}, request);
  ASSERT_TRUE(roomy.ok());
  const uint64_t tight = roomy->bytes_on(1) - roomy->bytes_of(plan::ItemKind::kWeights) / 2;
  const plan::PlanInput input{*m.file, m.spec, {cpu_device(), what_if_gpu(tight)}};
  auto fitted = plan::plan_with_fit(input, request, true);
  ASSERT_TRUE(fitted.ok());
  ASSERT_TRUE(fitted->fits);
  ASSERT_GT(fitted->request.n_cpu_layers, 0) << fitted->applied;

  Observations o;
  o.placement.value = placement_facts(*fitted, m.spec);
  o.budget.value = budget_facts(*fitted);
  auto offload = offload_facts(input, *fitted, 1e-3, roomy->prediction.bytes_per_token);
  ASSERT_TRUE(offload.ok());
  o.offload.value = *offload;
  EXPECT_GT(offload->predicted_cpu_seconds, 0);
  EXPECT_LT(offload->predicted_tps, 0.7 * offload->predicted_tps_all_on_gpu);
  EXPECT_GT(offload->measured_cpu_seconds, 0);
  EXPECT_LT(offload->measured_cpu_seconds, 1e-3);
  ASSERT_TRUE(offload->fits_entirely.has_value());
  EXPECT_TRUE(offload->fits_entirely->all_on_gpu);

  const auto verdicts = diagnose(o);
  const auto fired = problems(verdicts);
  EXPECT_TRUE(fired.count("offload.cliff"));
  EXPECT_TRUE(fired.count("placement.weights-spill"));
  EXPECT_FALSE(fired.count("placement.kv-on-host"));  // the KV of the CPU layers goes with them
  EXPECT_FALSE(fired.count("budget.does-not-fit"));
  for (const auto& v : verdicts) {
    if (v.rule == "offload.cliff") {
      EXPECT_NE(v.observation.find(fmt::format("{} of {} layers on the CPU",
                                               fitted->request.n_cpu_layers, m.spec.n_layer)),
                std::string::npos)
          << v.observation;
      EXPECT_NE(v.action.find(offload->fits_entirely->flags), std::string::npos) << v.action;
    }
    if (v.rule == "budget.fits-after-change") {
      EXPECT_NE(v.observation.find("--cpu-layers"), std::string::npos);
    }
  }
}

TEST(DoctorProbes, ARequestThatDoesNotFitIsNotMeasuredAndNamesWhatWould) {
  const Model m = stories();
  plan::Device small = cpu_device();
  small.budget_bytes = 3ull << 20;  // below the model with a 2048-token f16 KV cache
  auto p = plan::plan_with_fit({*m.file, m.spec, {small}}, {.n_ctx = 2048}, false);
  ASSERT_TRUE(p.ok());
  ASSERT_FALSE(p->fits);
  auto report = run({.file = m.file, .spec = m.spec, .plan = *p});
  ASSERT_TRUE(report.ok()) << report.error().message();
  const auto fired = problems(report->verdicts);
  EXPECT_EQ(fired, std::set<std::string>{"budget.does-not-fit"});
  for (const auto& v : report->verdicts) {
    if (v.rule == "budget.does-not-fit") {
      EXPECT_NE(v.action.find("--"), std::string::npos) << v.action;
    }
    if (v.check == "kv growth" || v.check == "roofline") {
      EXPECT_EQ(v.status, Status::kNotRun);
      EXPECT_NE(v.cause.find("does not fit"), std::string::npos);
    }
  }
}

// A GPU that reports a thermal slowdown on every reading.
class HotGpu final : public GpuTelemetry {
 public:
  std::string unavailable() const override { return ""; }
  std::vector<GpuSample> read() override {
    ++reads;
    return {{.name = "synthetic",
             .sm_clock_mhz = 1005,
             .max_sm_clock_mhz = 1980,
             .temperature_c = 93,
             .power_w = 180,
             .power_limit_w = 350,
             .utilization = 0.98,
             .thermal_slowdown = true}};
  }
  std::atomic<int> reads{0};
};

TEST(DoctorProbes, InjectedGpuTelemetryIsSampledDuringTheRunAndThrottlingNamed) {
  const Model m = stories();
  auto p = plan::make_plan({*m.file, m.spec, {cpu_device()}}, {.n_ctx = 256});
  ASSERT_TRUE(p.ok());
  HotGpu gpu;
  auto report = run({.file = m.file, .spec = m.spec, .plan = *p, .gpu = &gpu, .n_gen = 16});
  ASSERT_TRUE(report.ok()) << report.error().message();
  ASSERT_TRUE(report->observations.throttle.ran());
  EXPECT_GE(gpu.reads.load(), 1);
  EXPECT_EQ(report->observations.throttle->samples.size(), static_cast<size_t>(gpu.reads.load()));
  const auto fired = problems(report->verdicts);
  EXPECT_TRUE(fired.count("throttle.thermal"));
  EXPECT_FALSE(fired.count("throttle.power-cap"));
  EXPECT_FALSE(fired.count("throttle.low-clocks"));
  // The engine probes ran: two depths, the samplers, the roofline.
  ASSERT_TRUE(report->observations.kv_growth.ran());
  EXPECT_GT(report->observations.kv_growth->tps_short, 0);
  EXPECT_GT(report->observations.kv_growth->bytes_long,
            report->observations.kv_growth->bytes_short);
  ASSERT_TRUE(report->observations.memory.ran());
  EXPECT_GE(report->observations.memory->samples.size(), 1u);
}

// A streaming chat-completions server: `tokens` chunks `delay` apart per request, one request at
// a time when `serial`.
class FakeServer {
 public:
  FakeServer(bool serial, int tokens, std::chrono::milliseconds delay) {
    server_.Post("/v1/chat/completions",
                 [=, this](const httplib::Request&, httplib::Response& res) {
                   std::unique_lock lock(mutex_, std::defer_lock);
                   if (serial) lock.lock();
                   std::string body;
                   for (int i = 0; i < tokens; ++i) {
                     std::this_thread::sleep_for(delay);
                     body += "data: {\"choices\":[{\"delta\":{\"content\":\"tok\"}}]}\n\n";
                   }
                   body += "data: [DONE]\n\n";
                   res.set_content(body, "text/event-stream");
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }

 private:
  httplib::Server server_;
  std::mutex mutex_;
  int port_ = 0;
  std::thread thread_;
};

TEST(DoctorProbes, EndpointThatServesOneRequestAtATime) {
  // The whole response arrives at once: each stream's tokens come together after 8 × 25 ms.
  FakeServer server(true, 8, std::chrono::milliseconds(25));
  const auto probe = probe_endpoint({.url = server.url(), .n_concurrent = 4});
  ASSERT_TRUE(probe.ran()) << probe.not_run;
  EXPECT_EQ(probe->errors, 0);
  Observations o;
  o.endpoint = probe;
  const auto fired = problems(diagnose(o));
  EXPECT_EQ(fired, std::set<std::string>{"endpoint.serialized"})
      << probe->single_tps << " " << probe->single_ttft << " " << probe->concurrent_tps << " "
      << probe->concurrent_ttft_p50;
}

TEST(DoctorProbes, EndpointThatServesRequestsInParallel) {
  FakeServer server(false, 8, std::chrono::milliseconds(25));
  const auto probe = probe_endpoint({.url = server.url(), .n_concurrent = 4});
  ASSERT_TRUE(probe.ran()) << probe.not_run;
  Observations o;
  o.endpoint = probe;
  EXPECT_EQ(problems(diagnose(o)), std::set<std::string>{});
}

TEST(DoctorProbes, EndpointThatCannotBeReachedSaysSo) {
  const auto probe = probe_endpoint({.url = "http://127.0.0.1:1"});
  ASSERT_FALSE(probe.ran());
  EXPECT_NE(probe.not_run.find("could not complete one request at http://127.0.0.1:1"),
            std::string::npos)
      << probe.not_run;
  const auto bad = probe_endpoint({.url = "ftp://example"});
  ASSERT_FALSE(bad.ran());
  EXPECT_NE(bad.not_run.find("http://"), std::string::npos);
}

}  // namespace
}  // namespace doctor
