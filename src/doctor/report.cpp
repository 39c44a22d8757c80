// The doctor's report: a verdict table for people, JSON (verdicts and raw numbers) for programs.
#include <fmt/format.h>

#include "doctor/doctor.h"
#include "util/text_wrap.h"

namespace doctor {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DeviceBytes, name, gpu, simulated, budget, weights, kv, other)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PlacementFacts, devices, n_layer, n_cpu_layers, applied)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Alternative, change, flags, tokens_per_second, all_on_gpu)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProcessMemory, name, rss)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BudgetFacts, fits, problems, alternatives, applied, ram_need,
                                   ram_budget, ram_total, ram_margin, ram_budget_is_available,
                                   gpus_fit, ram_holders, nothing_fits)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BackendFacts, backend, isa_in_use, isa_best, isa_capped,
                                   isa_cap_source, threads, gpu_hardware, gpu_backend_built,
                                   bytes_on_real_gpu)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KvGrowthFacts, short_depth, long_depth, tps_short, tps_long,
                                   bytes_short, bytes_long, llc_bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MemorySample, seconds, rss, rss_anon, rss_file, mem_available,
                                   mem_total, swap_used, major_faults, weights_resident,
                                   weights_bytes, weights_evicted)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MemoryFacts, samples, kv_bytes, buffer_bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProcessLoad, name, cpus)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ContentionFacts, n_cpus, threads, other_cpus, steal_cpus,
                                   loadavg_1m, busiest, n_concurrent, single_tps, concurrent_tps)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GpuSample, name, sm_clock_mhz, max_sm_clock_mhz, temperature_c,
                                   power_w, power_limit_w, utilization, thermal_slowdown, power_cap,
                                   hw_slowdown)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ThrottleFacts, samples)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RooflineFacts, bytes_per_token, measured_tps, bandwidth,
                                   llc_bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EndpointFacts, url, single_ttft, single_tps, n_concurrent,
                                   concurrent_ttft_p50, concurrent_tps, errors, first_error)

void to_json(nlohmann::json& j, const OffloadFacts& f) {
  j = {{"simulated_gpu", f.simulated_gpu},
       {"n_cpu_layers", f.n_cpu_layers},
       {"n_layer", f.n_layer},
       {"cpu_layer_bytes_per_token", f.cpu_layer_bytes_per_token},
       {"predicted_cpu_seconds", f.predicted_cpu_seconds},
       {"predicted_transfer_seconds", f.predicted_transfer_seconds},
       {"predicted_tps", f.predicted_tps},
       {"predicted_tps_all_on_gpu", f.predicted_tps_all_on_gpu},
       {"measured_cpu_seconds", f.measured_cpu_seconds},
       {"fits_entirely",
        f.fits_entirely ? nlohmann::json(*f.fits_entirely) : nlohmann::json(nullptr)}};
}

namespace {

template <class T>
nlohmann::json probe_json(const Probe<T>& p) {
  if (!p.ran()) return {{"not_run", p.not_run}};
  return nlohmann::json(*p);
}

std::string cell(std::string text) {
  for (size_t at = 0; (at = text.find('|', at)) != std::string::npos; at += 2)
    text.replace(at, 1, "\\|");
  return text;
}

}  // namespace

std::string format_report(const Report& r, ReportStyle style) {
  std::string out = fmt::format("headroom doctor: {} ({:.1f} s)\n\n", r.model, r.seconds);
  int problems = 0;
  for (const auto& v : r.verdicts) problems += v.status == Status::kProblem;
  if (style == ReportStyle::kMarkdown) {
    out += "| check | verdict | observation (measured) | likely cause | action |\n";
    out += "|---|---|---|---|---|\n";
    for (const auto& v : r.verdicts) {
      out += fmt::format("| {} | {} | {} | {} | {} |\n", v.check, status_name(v.status),
                         cell(v.observation), cell(v.cause), cell(v.action));
    }
  } else {
    // One block per check, wrapped to kWidth columns under a 26-column gutter.
    constexpr size_t kWidth = 100;
    const std::string gutter(26, ' ');
    for (const auto& v : r.verdicts) {
      const std::string head = fmt::format("{:<16}{:<10}", v.check, status_name(v.status));
      out += util::wrap(v.observation.empty() ? "-" : v.observation, kWidth, head, gutter);
      if (!v.cause.empty()) out += util::wrap(v.cause, kWidth, gutter + "cause: ", gutter + "  ");
      if (!v.action.empty())
        out += util::wrap(v.action, kWidth, gutter + "action: ", gutter + "  ");
    }
  }
  out += problems == 0 ? "\nno problems found\n"
                       : fmt::format("\n{} problem{} found:\n", problems, problems > 1 ? "s" : "");
  for (const auto& v : r.verdicts) {
    if (v.status == Status::kProblem) {
      out += util::wrap(fmt::format("{} ({}): {} → {}", v.check, v.rule, v.cause, v.action), 100,
                        "  ", "    ");
    }
  }
  return out;
}

nlohmann::ordered_json report_json(const Report& r) {
  nlohmann::ordered_json doc;
  doc["model"] = r.model;
  doc["seconds"] = r.seconds;
  const RunFacts& run = r.run;
  doc["measured_run"] = {{"device", run.device},
                         {"max_seconds", run.max_seconds},
                         {"step_seconds", run.step_seconds},
                         {"prefill_seconds_per_token", run.prefill_seconds},
                         {"decode_seconds_per_token", run.decode_seconds},
                         {"n_gen", run.n_gen},
                         {"reps", run.reps},
                         {"short_depth", run.short_depth},
                         {"long_depth", run.long_depth},
                         {"n_concurrent", run.n_concurrent}};
  doc["verdicts"] = nlohmann::ordered_json::array();
  for (const auto& v : r.verdicts) {
    doc["verdicts"].push_back({{"check", v.check},
                               {"rule", v.rule},
                               {"status", status_name(v.status)},
                               {"observation", v.observation},
                               {"cause", v.cause},
                               {"action", v.action}});
  }
  const Observations& o = r.observations;
  nlohmann::json obs = {
      {"placement", probe_json(o.placement)},   {"budget", probe_json(o.budget)},
      {"backend", probe_json(o.backend)},       {"partial_offload", probe_json(o.offload)},
      {"kv_growth", probe_json(o.kv_growth)},   {"memory", probe_json(o.memory)},
      {"contention", probe_json(o.contention)}, {"throttling", probe_json(o.throttle)},
      {"roofline", probe_json(o.roofline)},     {"endpoint", probe_json(o.endpoint)}};
  doc["observations"] = nlohmann::ordered_json::parse(obs.dump());
  return doc;
}

}  // namespace doctor
