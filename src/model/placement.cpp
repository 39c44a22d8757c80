// The placement rule and what a placement answers about itself.
#include "model/placement.h"

#include <algorithm>

namespace model {

bool Placement::split() const {
  auto elsewhere = [&](int d) { return d != main_device; };
  return elsewhere(ple_device) ||
         std::any_of(layer_device.begin(), layer_device.end(), elsewhere) ||
         std::any_of(experts_device.begin(), experts_device.end(), elsewhere);
}

int Placement::layer(int il) const {
  return il < static_cast<int>(layer_device.size()) ? layer_device[il] : main_device;
}

int Placement::experts(int il) const {
  return il < static_cast<int>(experts_device.size()) ? experts_device[il] : layer(il);
}

Placement place(const Spec& spec, int main_device, int n_host_layers, bool ple_on_host,
                bool experts_on_host) {
  const bool on_accelerator = main_device != 0;
  Placement p{.main_device = main_device};
  p.ple_device = on_accelerator && ple_on_host && spec.n_embd_per_layer > 0 ? 0 : main_device;
  for (const LayerSpec& l : spec.layers) {
    const int layer = on_accelerator && l.il < n_host_layers ? 0 : main_device;
    p.layer_device.push_back(layer);
    p.experts_device.push_back(on_accelerator && experts_on_host && l.is_moe() ? 0 : layer);
  }
  return p;
}

}  // namespace model
