// doctor plan probes — the facts the planner already knows: placement, fit, partial offload.
#pragma once

#include "doctor/observations.h"
#include "plan/planner.h"

namespace doctor {

PlacementFacts placement_facts(const plan::Plan& plan, const model::Spec& spec);
BudgetFacts budget_facts(const plan::Plan& plan);
// With a GPU in the plan (present or --assume-gpu): the predicted cost of the layers left on the
// CPU, the speed with every layer on the GPU, and the fastest configuration that fits entirely.
// `measured_cpu_seconds_per_token`: this CPU's measured decode time for the whole model (0: none).
util::Result<OffloadFacts> offload_facts(const plan::PlanInput& input, const plan::Plan& plan,
                                         double measured_cpu_seconds_per_token,
                                         uint64_t cpu_bytes_per_token);

}  // namespace doctor
