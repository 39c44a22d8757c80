// engine::Adapters — the LoRA adapters an engine serves, by name: loaded into the model's slots
// (model/lora.h), taken by the requests that name them, and unloaded — the name at once, the
// slot once the last request under it has ended.
//
// Threads: load, unload, acquire and release run on the thread that steps the scheduler (they
// change what a forward pass reads); find and list may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "model/lora.h"
#include "model/model.h"
#include "util/result.h"

namespace engine {

struct AdapterInfo {
  std::string name;
  std::string path;
  float scale = 1.0f;  // the scale of requests that do not give their own
  int slot = -1;       // the model's slot (model::Batch::adapter)
  uint32_t id = 0;     // unique to this load (a reload is another adapter to the prefix cache)
  int max_rank = 0;
  int n_pairs = 0;    // matrices adapted
  int n_ignored = 0;  // pairs on KV-shared layers' k/v, which compute neither
  size_t bytes = 0;   // of its matrices in the slot (f32)
  float alpha = 0;
};

// An adapter to load at start: its name, file and the scale of requests that give none.
struct AdapterFile {
  std::string name, path;
  float scale = 1.0f;
};

// The slots a run needs for `files`: one per file at least (more if `given` says so), of their
// largest rank at least. Opens each against the base model to read it; errors as Adapters::load.
util::Result<model::LoraLimits> adapter_limits(const std::vector<AdapterFile>& files,
                                               const gguf::File& base, const model::Spec& spec,
                                               model::LoraLimits given);

// The prefix cache's context of K/V computed under an adapter at a scale (0: the base model):
// the load's id and the scale's bits, compared exactly (kv::BlockManager).
uint64_t adapter_context(uint32_t id, float scale);

class Adapters {
 public:
  Adapters(model::Model& model, const gguf::File& base, const model::Spec& spec,
           model::LoraLimits limits);

  const model::LoraLimits& limits() const { return limits_; }
  // Opens, checks and attaches the adapter at `path` under `name`. Errors are one line: a name
  // taken or malformed, a bad file (model::LoraAdapter::open), no free slot, a rank above the
  // planned one.
  util::Result<AdapterInfo> load(const std::string& name, const std::string& path, float scale);
  // The name goes now (new requests cannot name it); the slot is freed when no request holds it.
  util::Status unload(const std::string& name);
  // The adapter `name` for a new request, held until release(slot); nullopt when none is loaded.
  std::optional<AdapterInfo> acquire(const std::string& name);
  void release(int slot);

  std::optional<AdapterInfo> find(const std::string& name) const;
  std::vector<AdapterInfo> list() const;  // in load order
  std::string name_of(int slot) const;    // "" for a free slot

 private:
  struct Entry {
    AdapterInfo info;
    int refs = 0;
    bool unloading = false;  // its name is gone; the slot waits for refs to reach 0
  };
  void free_if_done(Entry& e);

  model::Model& model_;
  const gguf::File& base_;
  const model::Spec& spec_;
  model::LoraLimits limits_;
  mutable std::mutex mutex_;    // guards entries_ for find and list
  std::vector<Entry> entries_;  // loaded (and unloading) adapters in load order
  uint32_t next_id_ = 1;
};

}  // namespace engine
