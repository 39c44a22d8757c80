// Block reference counts, free lists, LRU eviction and the prefix index (blocks.h).
#include "kv/blocks.h"

#include <algorithm>
#include <cassert>

namespace kv {

BlockManager::BlockManager(std::vector<int> n_blocks, int anchor, int block_cells)
    : anchor_(anchor), block_cells_(block_cells) {
  groups_.resize(n_blocks.size());
  for (size_t g = 0; g < n_blocks.size(); ++g) {
    Group& group = groups_[g];
    const int n = n_blocks[g];
    group.refs.assign(n, 0);
    group.node.assign(n, -1);
    group.last.assign(n, 0);
    // Popped from the back: low ids first, which keeps a lone sequence's blocks in order.
    for (int b = n - 1; b >= 0; --b) group.free.push_back(b);
  }
  if (anchor_ >= 0) {
    const size_t nodes = static_cast<size_t>(n_blocks[anchor_]);
    parent_.assign(nodes, kRoot);
    context_.assign(nodes, 0);
    children_.assign(nodes, 0);
    node_tokens_.assign(nodes * block_cells_, 0);
    node_blocks_.assign(nodes * groups_.size(), -1);
    by_key_.reserve(nodes);
  }
}

size_t BlockManager::bookkeeping_bytes(std::span<const int> n_blocks, int anchor, int block_cells) {
  // Per block: reference count, node, release time, a free-list entry, and an entry of the
  // evictable set (a tree node: two ids, three pointers and a colour, plus the allocator's 16).
  constexpr size_t kSetEntry = 48 + 16;
  size_t total = 0;
  for (int n : n_blocks) {
    total += static_cast<size_t>(n) * (4 + 4 + 8 + 4 + kSetEntry);
  }
  if (anchor >= 0) {
    // Per node: parent, context, children, tokens, a block per group, and a hash-map entry (key,
    // value, next pointer, cached hash, allocator overhead) with its bucket.
    constexpr size_t kMapEntry = 8 + 4 + 8 + 8 + 16 + 8;
    total += static_cast<size_t>(n_blocks[anchor]) *
             (4 + 8 + 4 + 4 * static_cast<size_t>(block_cells) + 4 * n_blocks.size() + kMapEntry);
  }
  return total;
}

uint64_t BlockManager::key(int32_t parent, uint64_t context,
                           std::span<const int32_t> tokens) const {
  // FNV-1a over the parent, the context and the tokens: only a bucket key, entries are compared
  // exactly.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint32_t>(parent));
  mix(static_cast<uint32_t>(context));
  mix(static_cast<uint32_t>(context >> 32));
  for (int32_t t : tokens) mix(static_cast<uint32_t>(t));
  return h;
}

bool BlockManager::same_tokens(int32_t node, std::span<const int32_t> tokens) const {
  const int32_t* stored = node_tokens_.data() + static_cast<size_t>(node) * block_cells_;
  return std::equal(tokens.begin(), tokens.end(), stored);
}

int32_t BlockManager::find(int32_t parent, std::span<const int32_t> tokens,
                           uint64_t context) const {
  if (anchor_ < 0 || static_cast<int>(tokens.size()) != block_cells_) return -1;
  auto [first, last] = by_key_.equal_range(key(parent, context, tokens));
  for (auto it = first; it != last; ++it) {
    const int32_t node = it->second;
    if (parent_[node] == parent && context_[node] == context && same_tokens(node, tokens))
      return node;
  }
  return -1;
}

bool BlockManager::insert(int32_t parent, std::span<const int32_t> tokens, int32_t block,
                          uint64_t context) {
  assert(anchor_ >= 0 && groups_[anchor_].node[block] < 0 && groups_[anchor_].refs[block] > 0);
  if (find(parent, tokens, context) >= 0) return false;
  Group& a = groups_[anchor_];
  a.node[block] = block;
  ++a.n_cached;
  parent_[block] = parent;
  context_[block] = context;
  children_[block] = 0;
  std::copy(tokens.begin(), tokens.end(),
            node_tokens_.begin() + static_cast<ptrdiff_t>(block) * block_cells_);
  for (int g = 0; g < n_groups(); ++g) node_blocks_[index(block, g)] = -1;
  node_blocks_[index(block, anchor_)] = block;
  by_key_.emplace(key(parent, context, tokens), block);
  if (parent != kRoot && children_[parent]++ == 0) a.evictable.erase({a.last[parent], parent});
  return true;
}

bool BlockManager::attach(int32_t node, int g, int32_t block) {
  int32_t& slot = node_blocks_[index(node, g)];
  if (slot >= 0) return false;
  assert(groups_[g].node[block] < 0 && groups_[g].refs[block] > 0);
  slot = block;
  groups_[g].node[block] = node;
  ++groups_[g].n_cached;
  return true;
}

void BlockManager::make_evictable(int g, int32_t block) {
  Group& group = groups_[g];
  if (g == anchor_ && children_[block] > 0) return;  // its children go first
  group.evictable.insert({group.last[block], block});
}

void BlockManager::hold(int g, int32_t block) {
  Group& group = groups_[g];
  if (group.refs[block]++ > 0) return;
  assert(group.node[block] >= 0);  // only cached blocks are shared
  --group.n_idle_cached;
  group.evictable.erase({group.last[block], block});
}

void BlockManager::drop(int g, int32_t block) {
  Group& group = groups_[g];
  assert(group.refs[block] > 0);
  if (--group.refs[block] > 0) return;
  group.last[block] = ++clock_;
  if (group.node[block] < 0) {
    group.free.push_back(block);
    return;
  }
  ++group.n_idle_cached;
  make_evictable(g, block);
}

void BlockManager::evict_node(int32_t node) {
  auto [first, last] =
      by_key_.equal_range(key(parent_[node], context_[node],
                              {node_tokens_.data() + static_cast<size_t>(node) * block_cells_,
                               static_cast<size_t>(block_cells_)}));
  for (auto it = first; it != last; ++it) {
    if (it->second == node) {
      by_key_.erase(it);
      break;
    }
  }
  const int32_t parent = parent_[node];
  if (parent != kRoot && --children_[parent] == 0 && groups_[anchor_].refs[parent] == 0) {
    make_evictable(anchor_, parent);
  }
  for (int g = 0; g < n_groups(); ++g) {
    const int32_t b = node_blocks_[index(node, g)];
    node_blocks_[index(node, g)] = -1;
    if (b < 0 || g == anchor_) continue;
    Group& group = groups_[g];
    group.node[b] = -1;
    --group.n_cached;
    if (group.refs[b] == 0) {  // (a held one is freed when its holder lets go)
      --group.n_idle_cached;
      group.evictable.erase({group.last[b], b});
      group.free.push_back(b);
    }
  }
}

int32_t BlockManager::take(int g) {
  Group& group = groups_[g];
  int32_t block = -1;
  if (!group.free.empty()) {
    block = group.free.back();
    group.free.pop_back();
  } else if (!group.evictable.empty()) {
    block = group.evictable.begin()->second;
    group.evictable.erase(group.evictable.begin());
    --group.n_idle_cached;
    --group.n_cached;
    if (g == anchor_) {
      evict_node(block);
    } else {
      node_blocks_[index(group.node[block], g)] = -1;
    }
    group.node[block] = -1;
  }
  if (block >= 0) group.refs[block] = 1;
  return block;
}

}  // namespace kv
