// The plan as a table for people and as JSON for programs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "plan/planner.h"

namespace plan {

std::string format_plan(const Plan& plan, const model::Spec& spec, const std::string& source);
nlohmann::ordered_json plan_json(const Plan& plan, const model::Spec& spec, const std::string& source);

}  // namespace plan
