// kv::Cache — paged K/V storage shared by all sequences: full layers grow by blocks, sliding
// layers hold a ring, shared layers hold nothing. Rows are stored already quantized.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/ops.h"
#include "kv/geometry.h"
#include "util/aligned_buffer.h"
#include "util/result.h"

namespace kv {

struct CacheConfig {
  int n_ctx = 0;       // most positions one sequence may hold
  int n_ubatch = 512;  // largest micro-batch; sizes the sliding rings
  int n_slots = 1;     // sequences held at once
  DType k_type = DType::kF16;
  DType v_type = DType::kF16;
  int block_cells = 16;   // cells per storage block
  int n_full_blocks = 0;  // blocks in the full-attention pool; 0 = every slot at n_ctx
};

// Cache layers with the same attention pattern share block ids, as vLLM's cache groups do: a
// sequence has one block table per group, used by every layer of that group.
struct GroupGeometry {
  bool sliding = false;
  int window = 0;
  int cells_per_sequence = 0;   // full: n_ctx; sliding: the ring size before rounding
  int blocks_per_sequence = 0;  // ceil(cells_per_sequence / block_cells)
  int n_blocks = 0;             // pool size
  size_t bytes_per_block = 0;   // all layers of the group together, K and V
};

// The groups a cache with these layers and settings is made of (the planner uses this too).
util::Result<std::vector<GroupGeometry>> plan_groups(const std::vector<LayerGeometry>& layers,
                                                     const CacheConfig& config);
// Bytes of K/V storage such a cache allocates.
util::Result<size_t> storage_bytes(const std::vector<LayerGeometry>& layers,
                                   const CacheConfig& config);
// Host bookkeeping when every slot is fully reserved: block tables, cell positions, block pointers.
util::Result<size_t> bookkeeping_bytes(const std::vector<LayerGeometry>& layers,
                                       const CacheConfig& config);
// K/V bytes attention reads for one token at `depth` (tokens before it), summed over all layers:
// full layers read every earlier position, sliding layers at most W, shared layers their source.
size_t read_bytes_per_token(const std::vector<LayerGeometry>& layers, const CacheConfig& config,
                            int depth);

class Cache {
 public:
  // `device`: a backend whose own memory (a GPU's) holds the K/V rows and the views attention
  // reads of layers first_device_layer and later; the earlier layers, and every layer when
  // `device` is null, stay in host memory. A layer that reads another's cache (KV sharing) must
  // be on the same side of that boundary as its source.
  static util::Result<Cache> create(std::vector<LayerGeometry> layers, const CacheConfig& config,
                                    kernels::Backend* device = nullptr, int first_device_layer = 0);

  // Makes room for positions [0, n_positions) of `slot`. Returns false and changes nothing when
  // the pool is short of blocks; the caller waits or refuses. It never grows the pool.
  bool reserve(int slot, int n_positions);
  // Frees every block of `slot` at once and forgets its positions.
  void release(int slot);
  // Records that `pos` of `slot` is written in the current micro-batch (all groups).
  void set_position(int slot, int32_t pos);
  // Where layer il's new K/V rows for (slot, pos) go; il must own its cache.
  kernels::KvWrite destination(int il, int slot, int32_t pos);
  // What attention in layer il reads for `slot`: its own cache or its source layer's (in the
  // device's memory for a layer on the device, current as of the last sync()).
  const kernels::KvSpan* span(int il, int slot) const;
  // Uploads the device layers' views changed since the last call (block tables after reserve or
  // release, cell positions after set_position). Call it before the ops read span(). Without
  // device layers: nothing to do.
  util::Status sync();
  // Whether layer il's rows (or its source's) are in the device's memory.
  bool on_device(int il) const {
    return device_ != nullptr && layers_[il].source >= first_device_layer_;
  }

  const CacheConfig& config() const { return config_; }
  const std::vector<GroupGeometry>& groups() const { return groups_; }
  size_t bytes_allocated() const;  // storage held by the pool
  size_t bytes_in_use() const;     // storage in blocks that sequences hold
  size_t bytes_resident() const;   // storage whose pages are in RAM now
  int free_blocks(int group) const { return static_cast<int>(free_[group].size()); }
  int reserved_positions(int slot) const { return reserved_[slot]; }

 private:
  struct LayerStore {
    int group = -1;
    util::AlignedBuffer k, v;            // host: [n_blocks][block_cells][row]
    kernels::Buffer device_k, device_v;  // device: the same layout
    uint8_t* k_base = nullptr;           // whichever holds the rows
    uint8_t* v_base = nullptr;
    size_t k_row = 0, v_row = 0;
  };
  struct SlotView {  // per (owning layer, slot)
    std::vector<const uint8_t*> k_blocks, v_blocks;
    kernels::KvSpan span;
    // Device caches: device copies of k_blocks, v_blocks (at their longest) and of span, whose
    // pointers lead to them and to the group's device cell positions.
    kernels::Buffer device_k_blocks, device_v_blocks, device_span;
  };
  int cell_of(int group, int32_t pos) const;
  void refresh_views(int slot);
  util::Status allocate_device_views();

  std::vector<LayerGeometry> layers_;
  CacheConfig config_;
  std::vector<GroupGeometry> groups_;
  std::vector<LayerStore> stores_;          // by layer index; empty for shared layers
  std::vector<std::vector<int32_t>> free_;  // per group: free block ids
  std::vector<std::vector<std::vector<int32_t>>> tables_;    // [group][slot] → block ids
  std::vector<std::vector<std::vector<int32_t>>> cell_pos_;  // [group][slot] → position per cell
  std::vector<std::vector<SlotView>> views_;                 // [layer][slot]
  std::vector<int> reserved_;                                // per slot
  kernels::Backend* device_ = nullptr;                       // null: a host cache
  int first_device_layer_ = 0;                               // layers from here on use device_
  std::vector<std::vector<kernels::Buffer>> device_cell_pos_;  // [group][slot], at their longest
  std::vector<char> tables_changed_;                           // per slot, since the last sync()
  // [group][slot]: the cells whose positions changed since the last sync(), [first, last) — a
  // decode pass changes one, so sync() uploads that one instead of the slot's whole array.
  std::vector<std::vector<std::pair<int, int>>> cells_changed_;
};

}  // namespace kv
