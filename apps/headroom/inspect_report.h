// The inspect report: everything `headroom inspect` says about a GGUF file, as one JSON document.
//
// The JSON document is the single source of truth: --json prints it, and the text view is
// rendered from it, so the two can never disagree.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gguf/file.h"

namespace cli {

using Json = nlohmann::ordered_json;

// Arrays longer than this are summarised as type, length and their first elements.
constexpr size_t kArrayPreview = 8;

// file, metadata, tensors, totals (by type and by class) and, for a known architecture, the
// per-layer attention and KV geometry with KV bytes per token.
Json inspect_report(const gguf::File& file);

// The human-readable view of an inspect_report.
std::string render_inspect_text(const Json& report);

}  // namespace cli
