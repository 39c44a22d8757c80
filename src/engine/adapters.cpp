// The engine's LoRA adapters by name, with the requests that hold them (adapters.h).
#include "engine/adapters.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace engine {
namespace {

// Names travel in model fields, URLs and comma-separated metric labels: printable, no spaces or
// commas, at most 128 bytes.
util::Status check_name(const std::string& name) {
  const bool printable = std::all_of(name.begin(), name.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u != 0x7f && c != ',';
  });
  if (name.empty() || name.size() > 128 || !printable) {
    return util::errorf(
        "lora: adapter name '{}' — use 1 to 128 printable characters without spaces or commas",
        name);
  }
  return {};
}

}  // namespace

util::Result<model::LoraLimits> adapter_limits(const std::vector<AdapterFile>& files,
                                               const gguf::File& base, const model::Spec& spec,
                                               model::LoraLimits given) {
  model::LoraLimits limits = given;
  if (!files.empty() && given.max_loras > 0 && given.max_loras < static_cast<int>(files.size())) {
    return util::errorf("--max-loras {}: {} adapters are given with --lora", given.max_loras,
                        files.size());
  }
  limits.max_loras = std::max(limits.max_loras, static_cast<int>(files.size()));
  for (const AdapterFile& f : files) {
    HR_ASSIGN_OR_RETURN(model::LoraAdapter a, model::LoraAdapter::open(f.path, base, spec));
    limits.max_rank = std::max(limits.max_rank, a.max_rank());
  }
  return limits;
}

uint64_t adapter_context(uint32_t id, float scale) {
  return (static_cast<uint64_t>(id) << 32) | std::bit_cast<uint32_t>(scale);
}

Adapters::Adapters(model::Model& model, const gguf::File& base, const model::Spec& spec,
                   model::LoraLimits limits)
    : model_(model), base_(base), spec_(spec), limits_(limits) {}

util::Result<AdapterInfo> Adapters::load(const std::string& name, const std::string& path,
                                         float scale) {
  HR_TRY(check_name(name));
  if (!std::isfinite(scale))
    return util::errorf("lora: adapter '{}': scale {} is not a finite number", name, scale);
  if (find(name)) {
    return util::errorf(
        "lora: an adapter named '{}' is loaded already — unload it first or "
        "choose another name",
        name);
  }
  if (!limits_.enabled()) {
    return util::errorf(
        "lora: cannot load '{}': the model was planned without adapter slots — start it with "
        "--lora FILE or --max-loras N --max-lora-rank R",
        name);
  }
  HR_ASSIGN_OR_RETURN(model::LoraAdapter adapter, model::LoraAdapter::open(path, base_, spec_));
  HR_ASSIGN_OR_RETURN(const int slot, model_.attach_lora(adapter));
  Entry e;
  e.info = {.name = name,
            .path = path,
            .scale = scale,
            .slot = slot,
            .id = next_id_++,
            .max_rank = adapter.max_rank(),
            .n_pairs = static_cast<int>(adapter.pairs().size()),
            .n_ignored = adapter.n_ignored(),
            .bytes = adapter.bytes(),
            .alpha = adapter.alpha()};
  std::lock_guard lock(mutex_);
  entries_.push_back(e);
  return e.info;
}

util::Status Adapters::unload(const std::string& name) {
  std::lock_guard lock(mutex_);
  const auto it = std::find_if(entries_.begin(), entries_.end(),
                               [&](const Entry& e) { return !e.unloading && e.info.name == name; });
  if (it == entries_.end()) return util::errorf("lora: no adapter named '{}' is loaded", name);
  it->unloading = true;
  free_if_done(*it);
  std::erase_if(entries_, [](const Entry& e) { return e.info.slot < 0; });
  return {};
}

std::optional<AdapterInfo> Adapters::acquire(const std::string& name) {
  std::lock_guard lock(mutex_);
  for (Entry& e : entries_) {
    if (!e.unloading && e.info.name == name) {
      ++e.refs;
      return e.info;
    }
  }
  return std::nullopt;
}

void Adapters::release(int slot) {
  std::lock_guard lock(mutex_);
  for (Entry& e : entries_) {
    if (e.info.slot == slot && e.refs > 0) {
      --e.refs;
      free_if_done(e);
      break;
    }
  }
  std::erase_if(entries_, [](const Entry& e) { return e.info.slot < 0; });
}

void Adapters::free_if_done(Entry& e) {
  if (!e.unloading || e.refs > 0) return;
  model_.detach_lora(e.info.slot);
  e.info.slot = -1;
}

std::optional<AdapterInfo> Adapters::find(const std::string& name) const {
  std::lock_guard lock(mutex_);
  for (const Entry& e : entries_) {
    if (!e.unloading && e.info.name == name) return e.info;
  }
  return std::nullopt;
}

std::vector<AdapterInfo> Adapters::list() const {
  std::lock_guard lock(mutex_);
  std::vector<AdapterInfo> out;
  for (const Entry& e : entries_) {
    if (!e.unloading) out.push_back(e.info);
  }
  return out;
}

std::string Adapters::name_of(int slot) const {
  std::lock_guard lock(mutex_);
  for (const Entry& e : entries_) {
    if (e.info.slot == slot) return e.info.name;
  }
  return "";
}

}  // namespace engine
