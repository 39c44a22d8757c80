// sample::Constraint — structured output: which tokens may come next so that the text stays a
// prefix of a valid document (JSON matching a schema). Fails closed: a schema feature that is
// not enforced is refused when compiled, never silently ignored.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace sample {

class Constraint {
 public:
  virtual ~Constraint() = default;
  // Sets the logit of every token that would break the document to −infinity. `generated` are the
  // tokens produced so far (the constraint may cache its state across calls). Once the document is
  // complete only end-of-generation tokens remain allowed.
  virtual void mask(std::span<float> logits, std::span<const int32_t> generated) = 0;
  // Whether the text of `generated` is a complete document.
  virtual bool complete(std::span<const int32_t> generated) = 0;
};

// An OpenAI `response_format` object: {"type":"text"} (returns null: no constraint),
// {"type":"json_object"}, or {"type":"json_schema","json_schema":{"schema":{…},…}}. An
// unsupported or invalid schema is an error naming the feature and its JSON path.
util::Result<std::unique_ptr<Constraint>> compile_response_format(const nlohmann::json& response_format,
                                                                   const tokenizer::Tokenizer& tokenizer);
// The same for a body parsed as nlohmann::ordered_json: object properties are then generated in
// the order the schema lists them (a plain nlohmann::json has already sorted them by name). The
// vocabulary index behind the masks is built once per vocabulary and shared by later calls.
util::Result<std::unique_ptr<Constraint>> compile_response_format(const nlohmann::ordered_json& response_format,
                                                                   const tokenizer::Tokenizer& tokenizer);

}  // namespace sample
