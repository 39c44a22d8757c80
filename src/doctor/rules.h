// doctor rules — the diagnosis decision table: for each check, observation → likely cause →
// immediate action. Rules are pure functions of Observations, so tests inject any condition.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/observations.h"

namespace doctor {

enum class Status { kOk, kNote, kProblem, kNotRun };
std::string_view status_name(Status status);  // "ok", "note", "problem", "not run"

// What a rule saw, with the numbers behind it, and anything specific to add to its action.
struct Finding {
  std::string observation;
  std::string action_detail;
};

struct Rule {
  std::string_view check;  // the check it belongs to: "placement", "kv growth", …
  std::string_view id;     // stable name, e.g. "placement.kv-on-host"
  Status status;           // kProblem, kNote or kOk
  std::string_view when;   // the condition, in words (docs/doctor.md lists the same)
  std::string_view cause;
  std::string_view action;
  // Fires (returns what it saw) or not. Called only when the check's probe ran.
  std::function<std::optional<Finding>(const Observations&)> fires;
};

struct Verdict {
  std::string check, rule;
  Status status = Status::kOk;
  std::string observation, cause, action;
};

// The checks in report order, and the table of rules.
const std::vector<std::string_view>& checks();
const std::vector<Rule>& rules();

// Per check: every problem rule that fires; if none, the first note or ok rule that fires; if
// its probe did not run, one "not run" verdict saying why.
std::vector<Verdict> diagnose(const Observations& obs);

}  // namespace doctor
