// model::Placement — which device computes each part of a model and holds its weights (and, for a
// layer, its KV cache): 0 is the host (the CPU, weights in the file mapping), 1 the accelerator.
// The planner decides it once (plan::Plan::placement, made by place()); the engine, model::Lanes
// and kv::Cache execute it and decide nothing of their own.
#pragma once

#include <vector>

#include "model/spec.h"

namespace model {

struct Placement {
  int main_device = 0;              // the embeddings, the output head, and what is not below
  std::vector<int> layer_device;    // [n_layer] layer il: its weights, its compute, its KV cache
  std::vector<int> experts_device;  // [n_layer] MoE layer il's router and experts
  int ple_device = 0;               // Gemma 4's per-layer-embedding table, looked up where it is

  // Whether some part runs on the host while the main device is another (a split run).
  bool split() const;
  // The device of layer il (the main device when the placement lists no layers).
  int layer(int il) const;
  int experts(int il) const;
};

// The placement rule: everything on `main_device`, except, when that is the accelerator (1), the
// first n_host_layers layers, with ple_on_host the per-layer-embedding table, and with
// experts_on_host every MoE layer's router and experts, which stay on the host (0).
Placement place(const Spec& spec, int main_device, int n_host_layers = 0, bool ple_on_host = false,
                bool experts_on_host = false);

}  // namespace model
