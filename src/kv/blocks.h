// kv::BlockManager — the block ids of a KV cache's groups and the index of cached prefixes.
//
// A block of a group is free, held by one or more sequences (reference-counted: a cached prefix
// is shared), or cached and held by none — evictable, least recently released first. The prefix
// index has one node per full block of tokens, keyed by its parent node and its tokens (compared
// exactly, never by hash alone) and by its context — what else the K/V depend on besides the
// tokens (the LoRA adapter and scale they were computed under; 0: the base model) — holding the
// block of each group that stores that block's K/V.
// Nodes live in the anchor group (the full-attention layers, which need every earlier block): a
// node *is* its anchor block's id and exists while that block is cached, so the index never
// outgrows the pool. Anchor blocks are evicted leaves first: a node's descendants are held by
// every sequence that holds them only together with the node itself, so a node no sequence holds
// has no held descendants, and evicting leaves first never strands a reachable block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kv {

class BlockManager {
 public:
  static constexpr int32_t kRoot = -1;  // the parent of a prefix's first block

  BlockManager() = default;
  // `n_blocks` per group; `anchor`: the group whose blocks are prefix nodes (-1: no prefix index);
  // `block_cells` tokens per block.
  BlockManager(std::vector<int> n_blocks, int anchor, int block_cells);

  int n_groups() const { return static_cast<int>(groups_.size()); }
  int anchor() const { return anchor_; }
  int size(int g) const { return static_cast<int>(groups_[g].refs.size()); }
  // Blocks a sequence can get now: free ones and cached ones no sequence holds.
  int available(int g) const {
    return static_cast<int>(groups_[g].free.size()) + groups_[g].n_idle_cached;
  }
  int held(int g) const { return size(g) - available(g); }
  int cached(int g) const { return groups_[g].n_cached; }
  int refs(int g, int32_t block) const { return groups_[g].refs[block]; }
  bool is_cached(int g, int32_t block) const { return groups_[g].node[block] >= 0; }

  // A block for a sequence (held once, uncached): a free one, else the least recently released
  // cached one that no sequence holds, which leaves the index (an anchor block only as a leaf,
  // freeing its node's blocks in the other groups). -1 when none is available.
  int32_t take(int g);
  // One more sequence holds a cached block (a reused prefix).
  void hold(int g, int32_t block);
  // A sequence lets go of a block: held by none, a cached block becomes evictable (this is its
  // last use for LRU), an uncached one free.
  void drop(int g, int32_t block);

  // The node for the block of `tokens` after `parent` (kRoot for a prefix's first block) computed
  // in `context`, or -1.
  int32_t find(int32_t parent, std::span<const int32_t> tokens, uint64_t context = 0) const;
  // Makes `block` (of the anchor group, held by the caller, uncached) the node for `tokens` after
  // `parent` (a node the caller holds, or kRoot) in `context`. False, changing nothing, when that
  // node exists.
  bool insert(int32_t parent, std::span<const int32_t> tokens, int32_t block, uint64_t context = 0);
  // Node's block in group g, or -1 when that group's copy is not cached.
  int32_t block_of(int32_t node, int g) const { return node_blocks_[index(node, g)]; }
  // Caches `block` of group g (held by the caller) as node's; false when the node has one.
  bool attach(int32_t node, int g, int32_t block);
  int n_nodes() const { return anchor_ < 0 ? 0 : cached(anchor_); }

  // Host bytes these structures take at most for pools of `n_blocks` (kv bookkeeping).
  static size_t bookkeeping_bytes(std::span<const int> n_blocks, int anchor, int block_cells);

 private:
  struct Group {
    std::vector<int32_t> refs;   // per block: sequences holding it
    std::vector<int32_t> node;   // per block: the node whose K/V it caches, -1 uncached
    std::vector<uint64_t> last;  // per block: when it was last released (LRU)
    std::vector<int32_t> free;   // uncached blocks held by none
    // (last, block) of cached blocks held by none — in the anchor group only those without
    // children — least recently released first.
    std::set<std::pair<uint64_t, int32_t>> evictable;
    int n_cached = 0;       // blocks caching a node's K/V
    int n_idle_cached = 0;  // of those, held by none (the anchor's inner nodes too)
  };
  size_t index(int32_t node, int g) const { return static_cast<size_t>(node) * groups_.size() + g; }
  uint64_t key(int32_t parent, uint64_t context, std::span<const int32_t> tokens) const;
  bool same_tokens(int32_t node, std::span<const int32_t> tokens) const;
  void evict_node(int32_t node);  // an anchor leaf: its node and its cached blocks go
  void make_evictable(int g, int32_t block);

  std::vector<Group> groups_;
  int anchor_ = -1;
  int block_cells_ = 0;
  uint64_t clock_ = 0;
  // Nodes, indexed by their anchor block id.
  std::vector<int32_t> parent_, children_;
  std::vector<uint64_t> context_;
  std::vector<int32_t> node_tokens_;  // [node][block_cells]
  std::vector<int32_t> node_blocks_;  // [node][group]
  std::unordered_multimap<uint64_t, int32_t> by_key_;
};

}  // namespace kv
