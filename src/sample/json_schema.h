// JSON Schema → sample::Grammar. The supported subset and the policies (property order,
// additionalProperties default, whitespace) are described in docs/structured-output.md.
#pragma once

#include <nlohmann/json.hpp>

#include "sample/grammar.h"
#include "util/result.h"

namespace sample {

// Errors name the feature and where it is: "schema feature 'patternProperties' at
// /properties/x is not supported". Properties are generated in the order the schema lists them
// (the order nlohmann::ordered_json keeps; a plain nlohmann::json sorts keys by name).
util::Result<Grammar> compile_json_schema(const nlohmann::ordered_json& schema);
// Any JSON object (response_format json_object).
Grammar any_json_object_grammar();

}  // namespace sample
