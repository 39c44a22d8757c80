// Facts read from a plan, and the what-if plans the partial-offload check compares against.
#include "doctor/plan_probes.h"

#include "plan/devices.h"

namespace doctor {
namespace {

bool all_on_gpu(const plan::Request& r) {
  return r.n_cpu_layers == 0 && !r.ple_on_host && !r.experts_on_host;
}

Alternative alternative(const plan::Alternative& a) {
  return {a.change, a.flags, a.tokens_per_second, all_on_gpu(a.request)};
}

}  // namespace

PlacementFacts placement_facts(const plan::Plan& plan, const model::Spec& spec) {
  PlacementFacts p;
  for (const auto& d : plan.devices) {
    p.devices.push_back({.name = d.name,
                         .gpu = d.kind == plan::DeviceKind::kGpu,
                         .simulated = d.simulated,
                         .budget = d.budget_bytes});
  }
  for (const auto& item : plan.items) {
    DeviceBytes& d = p.devices[item.device];
    if (item.kind == plan::ItemKind::kWeights)
      d.weights += item.bytes;
    else if (item.kind == plan::ItemKind::kKvCache)
      d.kv += item.bytes;
    else
      d.other += item.bytes;
  }
  p.n_layer = spec.n_layer;
  p.n_cpu_layers = p.has_gpu() ? plan.request.n_cpu_layers : 0;
  p.applied = plan.applied;
  return p;
}

BudgetFacts budget_facts(const plan::Plan& plan) {
  BudgetFacts b{.fits = plan.fits,
                .problems = plan.problems,
                .applied = plan.applied,
                .nothing_fits = plan.nothing_fits};
  for (const auto& a : plan.alternatives) b.alternatives.push_back(alternative(a));
  const plan::Device& cpu = plan.devices[0];
  b.ram_need = plan.bytes_on(0);
  b.ram_budget = cpu.budget_bytes;
  b.ram_total = cpu.total_bytes;
  b.ram_margin = plan::cpu_margin_bytes(cpu.total_bytes);
  b.ram_budget_is_available = cpu.budget_is_available_ram;
  for (size_t d = 1; d < plan.devices.size(); ++d)
    b.gpus_fit = b.gpus_fit && plan.bytes_on(static_cast<int>(d)) <= plan.devices[d].budget_bytes;
  return b;
}

util::Result<OffloadFacts> offload_facts(const plan::PlanInput& input, const plan::Plan& plan,
                                         double measured_cpu_seconds_per_token,
                                         uint64_t cpu_bytes_per_token) {
  OffloadFacts f;
  f.simulated_gpu = plan.devices.size() > 1 && plan.devices[1].simulated;
  f.n_cpu_layers = plan.request.n_cpu_layers;
  f.n_layer = input.spec.n_layer;
  for (const auto& item : plan.items)
    f.cpu_layer_bytes_per_token += item.device == 0 ? item.bytes_per_token : 0;
  f.predicted_cpu_seconds =
      plan.prediction.seconds_per_device.empty() ? 0 : plan.prediction.seconds_per_device[0];
  f.predicted_transfer_seconds = plan.prediction.transfer_seconds;
  f.predicted_tps = plan.prediction.tokens_per_second;
  plan::Request everything_on_gpu = plan.request;
  everything_on_gpu.n_cpu_layers = 0;
  everything_on_gpu.ple_on_host = everything_on_gpu.experts_on_host = false;
  HR_ASSIGN_OR_RETURN(plan::Plan ideal, plan::plan_with_fit(input, everything_on_gpu, false));
  f.predicted_tps_all_on_gpu = ideal.prediction.tokens_per_second;
  if (ideal.fits) {
    f.fits_entirely = Alternative{"every layer on the GPU", "--cpu-layers 0",
                                  ideal.prediction.tokens_per_second, true};
  } else {
    for (const auto& a : ideal.alternatives) {
      if (all_on_gpu(a.request)) {
        f.fits_entirely = alternative(a);
        break;
      }
    }
  }
  if (measured_cpu_seconds_per_token > 0 && cpu_bytes_per_token > 0) {
    f.measured_cpu_seconds = measured_cpu_seconds_per_token *
                             static_cast<double>(f.cpu_layer_bytes_per_token) /
                             static_cast<double>(cpu_bytes_per_token);
  }
  return f;
}

}  // namespace doctor
