// The doctor's run: plan facts, engine measurements under the samplers, the endpoint; then the
// rules, and the report as a table or JSON.
#include "doctor/doctor.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <random>
#include <tuple>

#include "doctor/endpoint_probe.h"
#include "doctor/plan_probes.h"
#include "doctor/system_probes.h"
#include "engine/engine.h"
#include "engine/gpu.h"
#include "engine/measure.h"
#include "kernels/cpu/dot.h"
#include "model/model.h"
#include "plan/devices.h"
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

// Decode speed, tokens per second, after `depth` tokens (median of `reps` runs), through the
// scheduler.
util::Result<double> decode_speed(engine::Engine& e, int depth, int n_gen, int reps,
                                  std::mt19937& rng) {
  std::vector<double> rates;
  for (int rep = 0; rep < reps; ++rep) {
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
  double seconds_per_token = 0;  // the whole model on the CPU, short context (0: not on the CPU)
};

// How much the doctor decodes: the full workload, shrunk to fit its time limit.
struct Workload {
  int n_gen = 48, reps = 3, short_depth = 16, long_depth = 1024, n_concurrent = 4;

  // Seconds it takes at these per-token costs (a batched step counted as one step per stream).
  double seconds(double decode, double prefill) const {
    return reps * ((short_depth + long_depth) * prefill + 2 * (n_gen + 1) * decode) +
           n_gen * (1 + n_concurrent) * decode;
  }
  bool measures_depth() const { return long_depth >= 4 * std::max(short_depth, 1); }
  // The least the doctor decodes: one repeat of 8 tokens at a depth 4× the short one.
  Workload shortest() const {
    Workload w = *this;
    w.reps = 1;
    w.long_depth = 4 * w.short_depth;
    w.n_gen = std::min(w.n_gen, 8);
    return w;
  }
};

// The largest workload that fits `seconds`: fewer repeats, a shorter long depth, fewer tokens —
// down to the shortest; nullopt when even that is over.
std::optional<Workload> fit_workload(Workload w, double decode, double prefill, double seconds) {
  while (w.seconds(decode, prefill) > seconds) {
    if (w.reps > 1) {
      --w.reps;
    } else if (w.long_depth > 4 * w.short_depth) {
      w.long_depth = std::max(4 * w.short_depth, w.long_depth / 2);
    } else if (w.n_gen > w.shortest().n_gen) {
      w.n_gen = std::max(w.shortest().n_gen, w.n_gen / 2);
    } else {
      return std::nullopt;
    }
  }
  return w;
}

// What the shortest measurement would cost at the plan's predicted speed, to decline before
// loading a model that cannot be measured in time (prefill taken as 8× faster, as batching allows).
double predicted_minimum_seconds(double tokens_per_second) {
  const double decode = 1 / std::max(tokens_per_second, 1e-9);
  return Workload{}.shortest().seconds(decode, decode / 8);
}

std::string too_slow(double seconds, double limit, const std::string& how) {
  return fmt::format(
      "even the shortest measurement would take about {:.{}f} s ({}), past the doctor's {:g} s "
      "limit (--max-seconds); `headroom bench` measures it at length",
      seconds, seconds < 10 ? 1 : 0, how, limit);
}

util::Result<Measurement> measure(const Options& o, const plan::Plan& run_plan, GpuTelemetry& gpu,
                                  Observations& obs, RunFacts& facts, Clock::time_point start,
                                  std::string& cannot_measure) {
  auto progress = [&](const std::string& what) {
    if (o.progress)
      o.progress(
          fmt::format("{} ({:.0f} s of at most {:.0f} s)", what, since(start), o.max_seconds));
  };
  progress("loading the model");
  HR_ASSIGN_OR_RETURN(
      auto e, engine::Engine::create(o.file, o.spec, run_plan, {.gpu_backend = o.gpu_backend}));
  const int threads = e->n_threads();
  const bool on_cpu = !run_plan.uses_gpu();
  // The roofline's bandwidth: on the CPU measured now with the engine's threads, before the
  // samplers start (it allocates 512 MiB), and again after; on a GPU its datasheet peak.
  auto probe_bandwidth = [&] {
    if (!on_cpu) return run_plan.compute_device().bandwidth;
    const plan::BandwidthProbe probe = plan::probe_cpu_bandwidth(threads, size_t{512} << 20);
    plan::remember_cpu_bandwidth(threads, probe);
    return probe.bytes_per_second;
  };
  double bandwidth = probe_bandwidth();
  // The last-level cache as sysfs or CPUID describe it; where both are silent (some VMs), the
  // largest working set these threads read well above RAM's rate, measured now.
  uint64_t llc = on_cpu ? plan::last_level_cache_bytes() : 0;
  if (on_cpu && llc == 0) llc = plan::measure_cache_bytes(threads, bandwidth);
  std::vector<std::span<const uint8_t>> weights;
  for (const auto& w : plan::inventory(*o.file, o.spec).weights) {
    if (w.used) weights.push_back(o.file->find_tensor(w.name)->data);
  }
  std::mt19937 rng(7);

  // Calibration, untimed for the results. One forward pass of one token first: it faults in the
  // weights every token reads (a lazily read table, such as per-layer embeddings, only the rows
  // used) and prices a step on the kernels that run, before anything longer is tried.
  progress("warming up");
  Workload w{.n_gen = o.n_gen, .n_concurrent = std::min(o.n_concurrent, e->n_slots())};
  w.short_depth = std::min(16, e->n_ctx() / 8);
  w.long_depth = std::min(1024, e->n_ctx() - w.n_gen - 1);
  facts.device = run_plan.compute_device().name;
  auto t = Clock::now();
  HR_TRY(engine::prefill_only(*e, std::vector<int32_t>{1}));
  const double step = since(t);
  facts.step_seconds = step;
  auto over_limit = [&](double decode, double prefill, const std::string& how) {
    cannot_measure = too_slow(w.shortest().seconds(decode, prefill), o.max_seconds, how);
    return Measurement{};
  };
  if (w.shortest().seconds(step, 0) > o.max_seconds - since(start))
    return over_limit(step, 0, fmt::format("one step takes {:.2f} s on these kernels", step));
  // Then a batched prefill and a short decode, each a small share of what is left.
  const int n_warm = std::clamp(static_cast<int>(0.05 * (o.max_seconds - since(start)) / step), 2,
                                std::min(32, e->n_ctx() - 1));
  t = Clock::now();
  HR_TRY(engine::prefill_only(*e, std::vector<int32_t>(n_warm, 2)));
  const double prefill = since(t) / n_warm;
  HR_ASSIGN_OR_RETURN(auto probe, engine::generation_throughput(
                                      *e, engine::random_tokens(*e, w.short_depth, rng), 4, rng));
  const double decode = 1 / probe.tokens_per_second;
  facts.prefill_seconds = prefill;
  facts.decode_seconds = decode;
  // The run is fitted to a share of what is left: a 4-token calibration is noisy, the machine may
  // get busier, and the bandwidth probe and the report come after it. The shortest run may still
  // use all of it.
  const double left = o.max_seconds - since(start);
  auto fitted = fit_workload(w, decode, prefill, 0.75 * left);
  if (!fitted && w.shortest().seconds(decode, prefill) <= left) fitted = w.shortest();
  if (!fitted)
    return over_limit(decode, prefill,
                      fmt::format("a token takes {:.2f} s on these kernels", decode));
  w = *fitted;
  std::tie(facts.n_gen, facts.reps, facts.short_depth, facts.long_depth, facts.n_concurrent) =
      std::tie(w.n_gen, w.reps, w.short_depth, w.long_depth, w.n_concurrent);

  const CpuSnapshot cpu_before = cpu_snapshot();
  Sampler sampler(weights, &gpu, std::chrono::milliseconds(50));
  progress(fmt::format("decoding {} tokens at depth {}, {}×", w.n_gen, w.short_depth, w.reps));
  HR_ASSIGN_OR_RETURN(double tps_short, decode_speed(*e, w.short_depth, w.n_gen, w.reps, rng));
  const auto layers = model::kv_layers(o.spec);
  auto bytes_at = [&](int depth) {  // per token, in the middle of a decode run from `depth`
    return run_plan.prediction.bytes_per_token +
           kv::read_bytes_per_token(layers, run_plan.kv_config, depth + w.n_gen / 2) -
           kv::read_bytes_per_token(layers, run_plan.kv_config, 0);
  };
  // The calibration priced the run; the machine may have got busier since. Each later part runs
  // only if it still fits the limit at the speed the first part just had.
  const double slowdown = std::max(1.0, 1 / (tps_short * decode));
  auto fits = [&](double seconds) { return since(start) + seconds * slowdown <= o.max_seconds; };
  auto ran_out = [&] {
    return fmt::format(
        "the measured run had used {:.1f} of its {:g} s (--max-seconds) and decodes {:.1f}× slower "
        "than calibrated: this part would not fit",
        since(start), o.max_seconds, slowdown);
  };
  if (!w.measures_depth()) {
    obs.kv_growth.not_run = fmt::format(
        "the context ({} tokens) is too short to compare a short and a long depth", e->n_ctx());
  } else if (!fits(w.reps * (w.long_depth * prefill + (w.n_gen + 1) * decode))) {
    obs.kv_growth.not_run = ran_out();
  } else {
    progress(fmt::format("decoding {} tokens at depth {}, {}×", w.n_gen, w.long_depth, w.reps));
    HR_ASSIGN_OR_RETURN(double tps_long, decode_speed(*e, w.long_depth, w.n_gen, w.reps, rng));
    obs.kv_growth.value =
        KvGrowthFacts{w.short_depth,           w.long_depth,           tps_short, tps_long,
                      bytes_at(w.short_depth), bytes_at(w.long_depth), llc};
  }
  ContentionFacts c;
  c.threads = threads;
  c.n_concurrent = w.n_concurrent;
  const bool streams = fits(w.n_gen * (1 + w.n_concurrent) * decode);
  if (streams) {
    progress(fmt::format("one stream, then {} at once", w.n_concurrent));
    HR_ASSIGN_OR_RETURN(c.single_tps, streams_speed(*e, 1, w.n_gen, rng));
    HR_ASSIGN_OR_RETURN(c.concurrent_tps, streams_speed(*e, w.n_concurrent, w.n_gen, rng));
  } else {
    obs.contention.not_run = ran_out();
  }

  auto [memory, gpu_samples] = sampler.stop();
  if (streams) {
    fill_cpu_use(cpu_before, cpu_snapshot(), c);
    obs.contention.value = c;
  }
  using plan::ItemKind;
  obs.memory.value =
      MemoryFacts{std::move(memory), run_plan.bytes_of(ItemKind::kKvCache),
                  run_plan.bytes_of(ItemKind::kActivations) + run_plan.bytes_of(ItemKind::kLogits) +
                      run_plan.bytes_of(ItemKind::kHost)};
  if (gpu.unavailable().empty()) obs.throttle.value = ThrottleFacts{std::move(gpu_samples)};
  // The best of the probes before and after, and the decode itself: a noisy or disturbed probe
  // must not put the decode above its roofline.
  const double achieved = tps_short * static_cast<double>(bytes_at(w.short_depth));
  const bool from_ram = on_cpu && bytes_at(w.short_depth) > llc;
  bandwidth = std::max({bandwidth, probe_bandwidth(), from_ram ? achieved : 0.0});
  obs.roofline.value = RooflineFacts{bytes_at(w.short_depth), tps_short, bandwidth, llc};
  return Measurement{on_cpu ? 1.0 / tps_short : 0};
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

  // The engine runs where the plan puts it: on its GPUs when they are all present (or a backend
  // stands in for them), else on the CPU (a what-if GPU is not here to measure). Planned again
  // with slots for the concurrent streams.
  const bool what_if = std::any_of(p.devices.begin(), p.devices.end(),
                                   [](const plan::Device& d) { return d.simulated; });
  const bool on_gpu = p.uses_gpu() && (o.gpu_backend || !what_if);
  plan::Request run_request = p.request;
  run_request.n_slots = std::max(run_request.n_slots, o.n_concurrent);
  std::vector<plan::Device> run_devices = p.devices;
  if (!on_gpu) {
    run_request.n_cpu_layers = 0;
    run_request.ple_on_host = run_request.experts_on_host = false;
    run_devices = {p.devices[0]};
  }
  HR_ASSIGN_OR_RETURN(plan::Plan run_plan,
                      plan::make_plan({*o.file, o.spec, run_devices}, run_request));
  std::string cannot_measure;
  if (!p.fits) {
    cannot_measure =
        "the request does not fit its budgets (see budget), so the engine was not loaded";
  } else if (!run_plan.fits) {
    cannot_measure = fmt::format(
        "with slots for {} concurrent streams the model does not fit {}: {}", o.n_concurrent,
        on_gpu ? "its devices" : "in RAM (the engine runs on the CPU here)",
        run_plan.problems.empty() ? "" : run_plan.problems[0]);
  } else if (const double least = predicted_minimum_seconds(run_plan.prediction.tokens_per_second);
             least > o.max_seconds) {
    cannot_measure = too_slow(
        least, o.max_seconds,
        fmt::format("the plan predicts {:.2f} tok/s", run_plan.prediction.tokens_per_second));
  }
  Measurement measured;
  if (cannot_measure.empty()) {
    report.run.max_seconds = o.max_seconds;
    auto m = measure(o, run_plan, *gpu, obs, report.run, start, cannot_measure);
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
                                      run_plan.prediction.bytes_per_token));
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
