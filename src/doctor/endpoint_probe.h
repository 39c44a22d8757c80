// doctor endpoint probe — time to first token and tokens/s of an OpenAI-compatible server,
// one streaming request alone and then several at once.
#pragma once

#include <string>

#include "doctor/observations.h"

namespace doctor {

struct EndpointOptions {
  std::string url;  // http://host:port (or …/v1)
  int n_concurrent = 4;
  int max_tokens = 32;
  double timeout_seconds = 60;
};

// Not run (with why) when the server cannot be reached or never answers one request.
Probe<EndpointFacts> probe_endpoint(const EndpointOptions& options);

}  // namespace doctor
