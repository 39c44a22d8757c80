// kv::Cache — paged K/V storage shared by all sequences, with a prefix cache. Full-attention
// layers take a block per block_cells positions as a sequence grows; sliding-window layers keep a
// ring of blocks per sequence; KV-shared layers hold nothing. Rows are stored already quantized.
// Blocks that hold a complete block of tokens stay indexed by their token prefix after their
// sequence lets go, until the pool needs them (docs/memory.md, "Prefix reuse").
#pragma once

#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/ops.h"
#include "kv/blocks.h"
#include "kv/geometry.h"
#include "util/aligned_buffer.h"
#include "util/result.h"

namespace kv {

struct CacheConfig {
  int n_ctx = 0;       // most positions one sequence may hold
  int n_ubatch = 512;  // largest micro-batch a sequence evaluates at once; sizes the sliding rings
  int n_slots = 1;     // sequences held at once
  DType k_type = DType::kF16;
  DType v_type = DType::kF16;
  int block_cells = 16;  // cells per storage block
  // Blocks in each group's pool, in plan_groups() order (the planner sizes them from the KV
  // budget). Empty: full-attention groups hold every slot at n_ctx, sliding groups their default.
  std::vector<int> pool_blocks;
  bool prefix_cache = true;  // keep complete blocks indexed by their token prefix for reuse
};

// Cache layers with the same attention pattern share block ids, as vLLM's cache groups do: a
// sequence has one block table per group, used by every layer of that group.
struct GroupGeometry {
  bool sliding = false;
  int window = 0;
  // Blocks one sequence holds at most: full groups ceil(n_ctx / block_cells); sliding groups a
  // ring covering the window, a micro-batch, and the block a new micro-batch starts in
  // (ceil((W + n_ubatch + block_cells − 2) / block_cells), at most the context's).
  int blocks_per_sequence = 0;
  int cells_per_sequence = 0;  // blocks_per_sequence × block_cells
  // Sliding groups: the blocks a reused prefix needs for the window of its next token.
  int window_blocks = 0;
  int n_blocks = 0;            // pool size
  size_t bytes_per_block = 0;  // all layers of the group together, K and V
};

// The groups a cache with these layers and settings is made of (the planner uses this too).
// Without config.pool_blocks a sliding group's pool is a ring per slot plus, per slot, the window
// of one cached prefix (its prefix cache).
util::Result<std::vector<GroupGeometry>> plan_groups(const std::vector<LayerGeometry>& layers,
                                                     const CacheConfig& config);
// Bytes of K/V storage such a cache allocates.
util::Result<size_t> storage_bytes(const std::vector<LayerGeometry>& layers,
                                   const CacheConfig& config);
// Host bookkeeping at most: block tables, cell positions and block pointers of every slot at its
// longest, the block manager and the prefix index.
util::Result<size_t> bookkeeping_bytes(const std::vector<LayerGeometry>& layers,
                                       const CacheConfig& config);
// K/V bytes attention reads for one token at `depth` (tokens before it), summed over all layers:
// full layers read every earlier position, sliding layers at most W, shared layers their source.
size_t read_bytes_per_token(const std::vector<LayerGeometry>& layers, const CacheConfig& config,
                            int depth);

// One group's pool now.
struct PoolUsage {
  bool sliding = false;
  int n_blocks = 0;
  int held = 0;    // by running sequences
  int cached = 0;  // holding a reusable prefix (held or not)
  size_t bytes_per_block = 0;
};

// A change of a device cache's views: bytes to copy from host memory (valid until the cache's
// next call) to the device.
struct ViewChange {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

class Cache {
 public:
  // `device`: a backend whose own memory (a GPU's) holds the K/V rows and the views attention
  // reads of the layers `layer_device` places on it (non-zero; empty: every layer); the other
  // layers, and every layer when `device` is null, stay in host memory. A layer that reads
  // another's cache (KV sharing) must be placed with its source.
  static util::Result<Cache> create(std::vector<LayerGeometry> layers, const CacheConfig& config,
                                    kernels::Backend* device = nullptr,
                                    std::vector<int> layer_device = {});

  // Makes room for positions [0, n_positions) of `slot`: full groups' blocks up to there, sliding
  // groups' whole ring. Returns false and changes nothing when the pool is short of blocks (the
  // caller preempts, waits or refuses); it never grows the pool.
  bool reserve(int slot, int n_positions);
  // Whether reserve(slot, n_positions) would succeed and leave `spare` blocks available in the
  // full-attention groups.
  bool can_reserve(int slot, int n_positions, int spare = 0) const;
  // Lets go of every block of `slot` at once and forgets its positions. Indexed blocks stay cached
  // for reuse until the pool needs them.
  void release(int slot);

  // For an empty `slot` about to evaluate `tokens`: attaches the longest cached prefix of whole
  // blocks whose K/V every layer can reuse — full layers need all its blocks, sliding layers those
  // of the window before its end — leaving at least the last token to evaluate. Returns the
  // positions reused (0 without a hit); reserve() must follow before evaluating the rest.
  // `context` names what the K/V depend on besides the tokens (a LoRA adapter and its scale; 0:
  // the base model): only a prefix cached in the same context is reused.
  int reuse_prefix(int slot, std::span<const int32_t> tokens, uint64_t context = 0);
  // After a forward pass: the blocks of `slot` whose positions [0, n_computed) of `tokens` are all
  // written become reusable (indexed by their prefix, in `context`). A block whose prefix another
  // sequence already cached stays private, and so do its successors.
  void commit(int slot, std::span<const int32_t> tokens, int n_computed, uint64_t context = 0);

  // Records that `pos` of `slot` is written in the current micro-batch (all groups). A sliding
  // group's ring block that held an older block of positions is replaced first when another
  // sequence shares it or the prefix index caches it (a free block is always there: the pool
  // holds more than a ring per slot).
  void set_position(int slot, int32_t pos);
  // Where layer il's new K/V rows for (slot, pos) go; il must own its cache.
  kernels::KvWrite destination(int il, int slot, int32_t pos);
  // What attention in layer il reads for `slot`: its own cache or its source layer's (in the
  // device's memory for a layer on the device, current once take_changes() has reached it).
  const kernels::KvSpan* span(int il, int slot) const;
  // Appends the device layers' views changed since the last call (block tables after reserve,
  // release or a ring block's replacement, cell positions after set_position, a span's length):
  // the copies that must reach the device before the ops read span(). A decode step changes one
  // cell per group and slot, and a block's entries when a sequence enters a new block. Without
  // device layers: none.
  void take_changes(std::vector<ViewChange>& out);
  // Whether layer il has a cache of its own (a KV-shared layer reads its source's).
  bool owns(int il) const { return layers_[il].owns(); }
  // Whether layer il's rows (or its source's) are in the device's memory.
  bool on_device(int il) const {
    return device_ != nullptr && layer_device_[layers_[il].source] != 0;
  }

  const CacheConfig& config() const { return config_; }
  const std::vector<GroupGeometry>& groups() const { return groups_; }
  std::vector<PoolUsage> usage() const;
  size_t bytes_allocated() const;  // storage held by the pool
  size_t bytes_in_use() const;     // storage in blocks that sequences hold
  size_t bytes_cached() const;     // storage in blocks that hold a reusable prefix
  size_t bytes_resident() const;   // storage whose pages are in RAM now
  int reserved_positions(int slot) const { return slots_[slot].reserved; }
  // Positions the full-attention pool can still give to sequences (free and evictable blocks).
  int available_positions() const;

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
    // pointers lead to them and to the group's device cell positions; device_form is that span as
    // the device holds it (the source of its copies).
    kernels::Buffer device_k_blocks, device_v_blocks, device_span;
    kernels::KvSpan device_form;
  };
  struct Slot {
    // [group] full groups: the block of each block of positions; sliding groups: the ring's
    // blocks (-1 where not yet taken), `logical` the block of positions each holds (-1 none).
    std::vector<std::vector<int32_t>> blocks, logical;
    std::vector<int32_t> nodes;  // prefix node of each indexed block of positions
    bool indexing = true;        // false after a block another sequence had already cached
    int reserved = 0;
  };
  int cell_of(int group, int32_t pos) const;
  int blocks_wanted(int group, int slot, int n_positions) const;
  int longest_reusable(std::span<const int32_t> tokens, uint64_t context,
                       std::vector<int32_t>& nodes) const;
  void attach_block(int group, int slot, int entry, int32_t block, int logical);
  void replace_ring_block(int group, int slot, int entry, int logical);
  void point_views(int group, int slot, int entry);
  // After a slot's table changed size or its entries from `first_changed` on changed blocks.
  void refresh_views(int group, int slot, int first_changed);
  void mark_cells(int group, int slot, int first, int last);
  util::Status allocate_device_views();

  std::vector<LayerGeometry> layers_;
  CacheConfig config_;
  std::vector<GroupGeometry> groups_;
  std::vector<std::vector<int>> group_layers_;  // [group] owning layers
  std::vector<LayerStore> stores_;              // by layer index; empty for shared layers
  BlockManager blocks_;
  std::vector<Slot> slots_;
  std::vector<std::vector<std::vector<int32_t>>> cell_pos_;  // [group][slot] → position per cell
  std::vector<std::vector<SlotView>> views_;                 // [layer][slot]
  kernels::Backend* device_ = nullptr;                       // null: a host cache
  std::vector<int> layer_device_;                            // [layer] non-zero: on device_
  std::vector<std::vector<kernels::Buffer>> device_cell_pos_;  // [group][slot], at their longest
  // [group][slot], since the last take_changes(): the first block-table entry that changed, and
  // whether the span did (its length) — a new block changes one entry, not the whole table.
  struct TableChange {
    int first_entry = std::numeric_limits<int>::max();
    bool span = false;
  };
  std::vector<std::vector<TableChange>> tables_changed_;
  // [group][slot]: the cells whose positions changed since the last take_changes(), [first, last):
  // a decode pass changes one, so one cell goes up instead of the slot's whole array.
  std::vector<std::vector<std::pair<int, int>>> cells_changed_;
};

}  // namespace kv
