// The report of a load run: one JSON document, and the text summary and the self-contained HTML
// page (inline SVG drawn by inline JavaScript, no external assets) rendered from it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "load/runner.h"
#include "load/stats.h"

namespace load {

nlohmann::json report_json(const LoadOptions& options, const LoadRun& run, const Summary& summary);
std::string report_text(const nlohmann::json& report);
std::string report_html(const nlohmann::json& report);

}  // namespace load
