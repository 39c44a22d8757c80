// The doctor's run: plan facts, engine measurements under the samplers, the endpoint; then the
// rules, and the report as a table or JSON.
#include "doctor/doctor.h"

#include <algorithm>
#include <cstdlib>
#include <random>

#include "doctor/endpoint_probe.h"
#include "doctor/plan_probes.h"
#include "doctor/system_probes.h"
#include "engine/engine.h"
#include "engine/gpu.h"
#include "engine/measure.h"
#include "kernels/cpu/dot.h"
#include "model/model.h"
#include "plan/inventory.h"

namespace doctor {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

BackendFacts backend_facts(const plan::Plan& p) {
  using kernels::cpu::Isa;
  BackendFacts b;
  b.backend = p.request.reference_kernels ? "ref" : "cpu";
  Isa best = Isa::kScalar;
  for (Isa level : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni}) {
    if (kernels::cpu::cpu_supports(level)) best = level;
  }
  b.isa_in_use = kernels::cpu::isa_name(kernels::cpu::cpu_isa());
  b.isa_best = kernels::cpu::isa_name(best);
  b.isa_capped = kernels::cpu::cpu_isa() < best;
  if (const char* cap = std::getenv("HEADROOM_ISA"); cap && b.isa_capped)
    b.isa_cap_source = fmt::format("HEADROOM_ISA={}", cap);
  b.threads = p.request.n_threads > 0 ? p.request.n_threads : plan::physical_cores();
  b.gpu_hardware = nvidia_gpu_present();
  for (const auto& d : p.unused_devices) {  // NVML saw it though /proc did not (a container)
    if (b.gpu_hardware.empty() && d.kind == plan::DeviceKind::kGpu) b.gpu_hardware = d.name;
  }
  b.gpu_backend_built = engine::gpu_backend_built();
  for (size_t d = 0; d < p.devices.size(); ++d) {
    if (p.devices[d].kind == plan::DeviceKind::kGpu && !p.devices[d].simulated)
      b.bytes_on_real_gpu += p.bytes_on(static_cast<int>(d));
  }
  return b;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Decode speed, tokens per second, after `depth` tokens (median of 3 runs), through the scheduler.
util::Result<double> decode_speed(engine::Engine& e, int depth, int n_gen, std::mt19937& rng) {
  std::vector<double> rates;
  for (int rep = 0; rep < 3; ++rep) {
    const auto prefix = engine::random_tokens(e, depth, rng);
    HR_ASSIGN_OR_RETURN(auto t, engine::generation_throughput(e, prefix, n_gen, rng));
    rates.push_back(t.tokens_per_second);
  }
  return median(rates);
}

// Tokens per second in total with `n` streams generating at once through the scheduler.
util::Result<double> streams_speed(engine::Engine& e, int n, int n_gen, std::mt19937& rng) {
  engine::Scheduler scheduler(e);
  int tokens = 0;
  for (int i = 0; i < n; ++i) {
    engine::Request r;
    for (int t = 0; t < 8; ++t) r.prompt.push_back(static_cast<int32_t>(rng() % e.spec().n_vocab));
    r.max_tokens = n_gen;
    r.sampling.temperature = 0;
    r.on_token = [&](int32_t, float) {
      ++tokens;
      return true;
    };
    auto submitted = scheduler.submit(std::move(r));
    if (submitted.refusal != engine::Refusal::kNone) return util::Error(submitted.message);
  }
  const auto start = Clock::now();
  while (!scheduler.idle()) HR_TRY(scheduler.step());
  return tokens / since(start);
}

struct Measurement {
  double seconds_per_token = 0;  // the whole model on this CPU, short context
};

util::Result<Measurement> measure(const Options& o, const plan::Plan& cpu_plan, GpuTelemetry& gpu,
                                  Observations& obs) {
  HR_ASSIGN_OR_RETURN(auto e, engine::Engine::create(o.file, o.spec, cpu_plan));
  const int threads = e->n_threads();
  // Bandwidth now, with the engine's threads, before the samplers start (it allocates 512 MiB).
  const double bandwidth = plan::measure_cpu_bandwidth(threads, size_t{512} << 20);
  std::vector<std::span<const uint8_t>> weights;
  for (const auto& w : plan::inventory(*o.file, o.spec).weights) {
    if (w.used) weights.push_back(o.file->find_tensor(w.name)->data);
  }
  std::mt19937 rng(7);
  // Warm-up, untimed: faults the weights in, so the samples below see the steady state.
  HR_TRY(engine::prefill_only(*e, std::vector<int32_t>(std::min(32, e->n_ctx() - 1), 1)));
  const CpuSnapshot cpu_before = cpu_snapshot();
  Sampler sampler(weights, &gpu, std::chrono::milliseconds(50));

  const int n_gen = std::max(4, std::min(o.n_gen, e->n_ctx() / 4));
  const int short_depth = std::min(16, e->n_ctx() / 8);
  const int long_depth = std::min(1024, e->n_ctx() - n_gen - 1);
  HR_ASSIGN_OR_RETURN(double tps_short, decode_speed(*e, short_depth, n_gen, rng));
  const auto layers = model::kv_layers(o.spec);
  auto bytes_at = [&](int depth) {  // per token, in the middle of a decode run from `depth`
    return cpu_plan.prediction.bytes_per_token +
           kv::read_bytes_per_token(layers, cpu_plan.kv_config, depth + n_gen / 2) -
           kv::read_bytes_per_token(layers, cpu_plan.kv_config, 0);
  };
  if (long_depth >= 4 * std::max(short_depth, 1)) {
    HR_ASSIGN_OR_RETURN(double tps_long, decode_speed(*e, long_depth, n_gen, rng));
    obs.kv_growth.value = KvGrowthFacts{short_depth,
                                        long_depth,
                                        tps_short,
                                        tps_long,
                                        bytes_at(short_depth),
                                        bytes_at(long_depth),
                                        last_level_cache_bytes()};
  } else {
    obs.kv_growth.not_run = fmt::format(
        "the context ({} tokens) is too short to compare a short and a long depth", e->n_ctx());
  }
  ContentionFacts c;
  c.threads = threads;
  c.n_concurrent = std::min(o.n_concurrent, e->n_slots());
  HR_ASSIGN_OR_RETURN(c.single_tps, streams_speed(*e, 1, n_gen, rng));
  HR_ASSIGN_OR_RETURN(c.concurrent_tps, streams_speed(*e, c.n_concurrent, n_gen, rng));

  auto [memory, gpu_samples] = sampler.stop();
  fill_cpu_use(cpu_before, cpu_snapshot(), c);
  obs.contention.value = c;
  using plan::ItemKind;
  obs.memory.value =
      MemoryFacts{std::move(memory), cpu_plan.bytes_of(ItemKind::kKvCache),
                  cpu_plan.bytes_of(ItemKind::kActivations) + cpu_plan.bytes_of(ItemKind::kLogits) +
                      cpu_plan.bytes_of(ItemKind::kHost)};
  if (gpu.unavailable().empty()) obs.throttle.value = ThrottleFacts{std::move(gpu_samples)};
  obs.roofline.value =
      RooflineFacts{bytes_at(short_depth), tps_short, bandwidth, last_level_cache_bytes()};
  return Measurement{1.0 / tps_short};
}

}  // namespace

util::Result<Report> run(const Options& o) {
  const auto start = Clock::now();
  Report report;
  Observations& obs = report.observations;
  const plan::Plan& p = o.plan;
  obs.placement.value = placement_facts(p, o.spec);
  obs.budget.value = budget_facts(p);
  obs.budget.value->ram_holders = memory_holders(5);
  obs.backend.value = backend_facts(p);
  std::unique_ptr<GpuTelemetry> own_gpu;
  GpuTelemetry* gpu = o.gpu;
  if (!gpu) {
    own_gpu = default_gpu_telemetry();
    gpu = own_gpu.get();
  }

  // The engine runs on the CPU: plan the same request there, with slots for concurrent streams.
  plan::Request cpu_request = p.request;
  cpu_request.n_cpu_layers = 0;
  cpu_request.ple_on_host = cpu_request.experts_on_host = false;
  cpu_request.n_slots = std::max(cpu_request.n_slots, o.n_concurrent);
  HR_ASSIGN_OR_RETURN(plan::Plan cpu_plan,
                      plan::make_plan({*o.file, o.spec, {p.devices[0]}}, cpu_request));
  std::string cannot_measure;
  if (!p.fits) {
    cannot_measure =
        "the request does not fit its budgets (see budget), so the engine was not loaded";
  } else if (!cpu_plan.fits) {
    cannot_measure =
        fmt::format("the engine runs on the CPU here and the model does not fit in RAM there: {}",
                    cpu_plan.problems.empty() ? "" : cpu_plan.problems[0]);
  } else if (cpu_plan.prediction.tokens_per_second < o.min_measured_tps) {
    cannot_measure = fmt::format(
        "the model is too large to measure quickly: the plan predicts {:.1f} tok/s on this "
        "CPU; `headroom bench` measures it at length",
        cpu_plan.prediction.tokens_per_second);
  }
  Measurement measured;
  if (cannot_measure.empty()) {
    auto m = measure(o, cpu_plan, *gpu, obs);
    if (m)
      measured = *m;
    else
      cannot_measure = "the engine failed while measuring: " + m.error().message();
  }
  if (!cannot_measure.empty()) {
    for (auto* probe : {&obs.kv_growth.not_run, &obs.memory.not_run, &obs.contention.not_run,
                        &obs.roofline.not_run}) {
      *probe = cannot_measure;
    }
    obs.kv_growth.value.reset();
    obs.memory.value.reset();
    obs.contention.value.reset();
    obs.roofline.value.reset();
  }
  if (!gpu->unavailable().empty()) {
    obs.throttle = Probe<ThrottleFacts>::skipped(gpu->unavailable());
  } else if (!obs.throttle.ran()) {
    obs.throttle.value = ThrottleFacts{gpu->read()};  // not under load: the engine was not measured
  }

  if (p.devices.size() < 2) {
    obs.offload.not_run =
        "no GPU: every layer runs on the CPU, so nothing is offloaded; plan a what-if with "
        "--assume-gpu MEM@GB/s";
  } else {
    HR_ASSIGN_OR_RETURN(obs.offload.value,
                        offload_facts({*o.file, o.spec, p.devices}, p, measured.seconds_per_token,
                                      cpu_plan.prediction.bytes_per_token));
  }
  if (o.endpoint.empty()) {
    obs.endpoint.not_run =
        "no --endpoint given: pass the URL of an OpenAI-compatible server to probe it";
  } else {
    obs.endpoint = probe_endpoint({.url = o.endpoint, .n_concurrent = o.n_concurrent});
  }
  report.verdicts = diagnose(obs);
  report.seconds = since(start);
  return report;
}

}  // namespace doctor
