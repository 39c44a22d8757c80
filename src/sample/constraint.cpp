// Structured output (placeholder until the grammar lands): refuses every constraint, so nothing is
// ever generated unconstrained under a 200.
#include "sample/constraint.h"

namespace sample {

util::Result<std::unique_ptr<Constraint>> compile_response_format(const nlohmann::json& response_format,
                                                                   const tokenizer::Tokenizer&) {
  if (response_format.is_object() && response_format.value("type", "") == "text") {
    return std::unique_ptr<Constraint>();
  }
  return util::errorf("response_format: structured output is not supported by this build");
}

}  // namespace sample
