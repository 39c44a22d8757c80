// Paged KV storage: block pools per group, block tables and rings per sequence, exact per-cell
// positions, and reuse of cached prefixes.
#include "kv/cache.h"

#include <algorithm>
#include <cassert>

#include "util/memory.h"

namespace kv {
namespace {

int div_up(int a, int b) {
  return (a + b - 1) / b;
}

int group_of(const std::vector<GroupGeometry>& groups, const LayerGeometry& l) {
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].sliding == l.sliding && groups[g].window == (l.sliding ? l.window : 0))
      return static_cast<int>(g);
  }
  return -1;
}

GroupGeometry group_geometry(const LayerGeometry& l, const CacheConfig& config) {
  const int bc = config.block_cells;
  const int context_blocks = div_up(config.n_ctx, bc);
  GroupGeometry geo{.sliding = l.sliding, .window = l.sliding ? l.window : 0};
  if (!l.sliding) {
    geo.blocks_per_sequence = context_blocks;
    geo.n_blocks = context_blocks * config.n_slots;
  } else {
    // A block of positions leaves the ring whole, when the first position of the block that
    // takes its place is written: the ring must hold the window before a micro-batch's first
    // token, the micro-batch, and the rest of the block the window starts in (bc − 1 cells).
    geo.blocks_per_sequence =
        std::min(context_blocks, div_up(l.window + config.n_ubatch + bc - 2, bc));
    geo.window_blocks = std::min(context_blocks, div_up(l.window - 1, bc) + 1);
    geo.n_blocks = (geo.blocks_per_sequence + geo.window_blocks) * config.n_slots;
  }
  geo.cells_per_sequence = geo.blocks_per_sequence * bc;
  return geo;
}

}  // namespace

util::Result<std::vector<GroupGeometry>> plan_groups(const std::vector<LayerGeometry>& layers,
                                                     const CacheConfig& config) {
  if (config.n_ctx <= 0 || config.n_slots <= 0 || config.n_ubatch <= 0 || config.block_cells <= 0) {
    return util::errorf("KV cache: context {}, slots {}, micro-batch {} must all be positive",
                        config.n_ctx, config.n_slots, config.n_ubatch);
  }
  std::vector<GroupGeometry> groups;
  for (const auto& l : layers) {
    if (!l.owns()) {
      const auto& source = layers[l.source];
      if (source.sliding != l.sliding || (l.sliding && source.window != l.window)) {
        return util::errorf(
            "KV cache: layer {} reads layer {}'s cache but attends over another window", l.il,
            l.source);
      }
      continue;
    }
    HR_TRY(check_cache_type(config.k_type, l.kv_dim(), "K"));
    HR_TRY(check_cache_type(config.v_type, l.kv_dim(), "V"));
    int g = group_of(groups, l);
    if (g < 0) {
      groups.push_back(group_geometry(l, config));
      g = static_cast<int>(groups.size()) - 1;
    }
    groups[g].bytes_per_block +=
        static_cast<size_t>(config.block_cells) *
        (row_bytes(config.k_type, l.kv_dim()) + row_bytes(config.v_type, l.kv_dim()));
  }
  if (!config.pool_blocks.empty()) {
    if (config.pool_blocks.size() != groups.size()) {
      return util::errorf("KV cache: {} pool sizes for {} groups", config.pool_blocks.size(),
                          groups.size());
    }
    for (size_t g = 0; g < groups.size(); ++g) groups[g].n_blocks = config.pool_blocks[g];
  }
  for (const auto& g : groups) {
    if (g.n_blocks < g.blocks_per_sequence ||
        (g.sliding && g.n_blocks <= g.blocks_per_sequence * config.n_slots)) {
      return util::errorf("KV cache: a pool of {} blocks cannot hold one sequence's {} blocks{}",
                          g.n_blocks, g.blocks_per_sequence,
                          g.sliding ? " per slot and a spare block" : "");
    }
  }
  return groups;
}

util::Result<size_t> storage_bytes(const std::vector<LayerGeometry>& layers,
                                   const CacheConfig& config) {
  HR_ASSIGN_OR_RETURN(auto groups, plan_groups(layers, config));
  size_t total = 0;
  for (const auto& g : groups) total += g.bytes_per_block * static_cast<size_t>(g.n_blocks);
  return total;
}

namespace {

// The group whose blocks index prefixes: a full-attention one (every earlier block is needed to
// reuse a prefix), or none.
int anchor_group(const std::vector<GroupGeometry>& groups, const CacheConfig& config) {
  if (!config.prefix_cache) return -1;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].sliding) return static_cast<int>(g);
  }
  return -1;
}

}  // namespace

util::Result<size_t> bookkeeping_bytes(const std::vector<LayerGeometry>& layers,
                                       const CacheConfig& config) {
  HR_ASSIGN_OR_RETURN(auto groups, plan_groups(layers, config));
  size_t total = 0;
  std::vector<int> pools;
  for (const auto& g : groups) {
    const size_t blocks = static_cast<size_t>(g.blocks_per_sequence) * config.n_slots;
    total += blocks * sizeof(int32_t) * (g.sliding ? 2 : 1);  // block tables (and ring entries)
    total += blocks * config.block_cells * sizeof(int32_t);   // cell positions
    pools.push_back(g.n_blocks);
  }
  for (const auto& l : layers) {
    if (!l.owns()) continue;
    const auto& g = groups[group_of(groups, l)];
    total += static_cast<size_t>(g.blocks_per_sequence) * config.n_slots * 2 *
             sizeof(void*);  // block pointers
  }
  const int anchor = anchor_group(groups, config);
  if (anchor >= 0) {  // each slot's prefix nodes
    total +=
        static_cast<size_t>(groups[anchor].blocks_per_sequence) * config.n_slots * sizeof(int32_t);
  }
  return total + BlockManager::bookkeeping_bytes(pools, anchor, config.block_cells);
}

size_t read_bytes_per_token(const std::vector<LayerGeometry>& layers, const CacheConfig& config,
                            int depth) {
  size_t total = 0;
  for (const auto& l : layers) {
    const int visible = l.sliding ? std::min(depth + 1, l.window) : depth + 1;
    total += static_cast<size_t>(visible) *
             (row_bytes(config.k_type, l.kv_dim()) + row_bytes(config.v_type, l.kv_dim()));
  }
  return total;
}

util::Result<Cache> Cache::create(std::vector<LayerGeometry> layers, const CacheConfig& config,
                                  kernels::Backend* device, std::vector<int> layer_device) {
  Cache c;
  c.device_ = device;
  const int n_layers = static_cast<int>(layers.size());
  if (layer_device.empty()) layer_device.assign(n_layers, device != nullptr ? 1 : 0);
  if (static_cast<int>(layer_device.size()) != n_layers) {
    return util::errorf("KV cache: a placement of {} layers for {}", layer_device.size(), n_layers);
  }
  for (const auto& l : layers) {
    if (l.source < 0 || l.source >= n_layers || !layers[l.source].owns()) {
      return util::errorf("KV cache: layer {} reads layer {}, which owns no cache", l.il, l.source);
    }
    if (device != nullptr && (layer_device[l.il] != 0) != (layer_device[l.source] != 0)) {
      return util::errorf(
          "KV cache: layer {} reads layer {}'s cache, and the placement puts one on the host and "
          "the other on {}",
          l.il, l.source, device->name());
    }
  }
  c.layer_device_ = std::move(layer_device);
  HR_ASSIGN_OR_RETURN(c.groups_, plan_groups(layers, config));
  c.layers_ = std::move(layers);
  c.config_ = config;
  c.group_layers_.resize(c.groups_.size());
  c.stores_.resize(c.layers_.size());
  for (const auto& l : c.layers_) {
    if (!l.owns()) continue;
    LayerStore& s = c.stores_[l.il];
    s.group = group_of(c.groups_, l);
    c.group_layers_[s.group].push_back(l.il);
    s.k_row = row_bytes(config.k_type, l.kv_dim());
    s.v_row = row_bytes(config.v_type, l.kv_dim());
    const size_t cells = static_cast<size_t>(c.groups_[s.group].n_blocks) * config.block_cells;
    if (c.on_device(l.il)) {
      auto k = kernels::Buffer::make(*device, cells * s.k_row);
      auto v = kernels::Buffer::make(*device, cells * s.v_row);
      if (!k || !v) {
        return util::errorf(
            "KV cache: cannot allocate {} bytes for layer {} on {} — lower --kv-budget or --ctx, "
            "or use a quantized KV type",
            cells * (s.k_row + s.v_row), l.il, device->name());
      }
      s.device_k = std::move(*k);
      s.device_v = std::move(*v);
      s.k_base = s.device_k.get<uint8_t>();
      s.v_base = s.device_v.get<uint8_t>();
      continue;
    }
    // Lazy: the pool's pages are committed only as tokens arrive (they read as zeros before).
    s.k = util::AlignedBuffer(cells * s.k_row, util::AlignedBuffer::Init::kLazy);
    s.v = util::AlignedBuffer(cells * s.v_row, util::AlignedBuffer::Init::kLazy);
    if (!s.k.ok() || !s.v.ok()) {
      return util::errorf(
          "KV cache: cannot allocate {} bytes for layer {} — lower --kv-budget or --ctx, or use a "
          "quantized KV type",
          cells * (s.k_row + s.v_row), l.il);
    }
    s.k_base = s.k.data();
    s.v_base = s.v.data();
  }
  std::vector<int> pools;
  for (const auto& g : c.groups_) pools.push_back(g.n_blocks);
  c.blocks_ = BlockManager(pools, anchor_group(c.groups_, config), config.block_cells);
  const size_t n_groups = c.groups_.size();
  c.slots_.resize(config.n_slots);
  for (Slot& s : c.slots_) {
    s.blocks.resize(n_groups);
    s.logical.resize(n_groups);
  }
  c.cell_pos_.assign(n_groups, std::vector<std::vector<int32_t>>(config.n_slots));
  c.views_.resize(c.layers_.size());
  for (const auto& l : c.layers_) {
    c.views_[l.il].resize(l.owns() ? config.n_slots : 0);
    for (auto& v : c.views_[l.il]) {
      v.span.k_type = config.k_type;
      v.span.v_type = config.v_type;
      v.span.n_head_kv = l.n_head_kv;
      v.span.head_dim = l.head_dim;
      v.span.cells_per_block = config.block_cells;
      v.span.k_row_bytes = c.stores_[l.il].k_row;
      v.span.v_row_bytes = c.stores_[l.il].v_row;
    }
  }
  c.tables_changed_.assign(
      n_groups, std::vector<TableChange>(config.n_slots, {.first_entry = 0, .span = true}));
  c.cells_changed_.assign(n_groups, std::vector<std::pair<int, int>>(config.n_slots, {0, 0}));
  if (device != nullptr) HR_TRY(c.allocate_device_views());
  return c;
}

util::Status Cache::allocate_device_views() {
  auto make = [&](size_t bytes) { return kernels::Buffer::make(*device_, bytes); };
  device_cell_pos_.resize(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    const size_t cells = static_cast<size_t>(groups_[g].cells_per_sequence);
    for (int slot = 0; slot < config_.n_slots; ++slot) {
      HR_ASSIGN_OR_RETURN(auto b, make(cells * sizeof(int32_t)));
      device_cell_pos_[g].push_back(std::move(b));
    }
  }
  for (const auto& l : layers_) {
    if (!l.owns() || !on_device(l.il)) continue;
    const size_t blocks = static_cast<size_t>(groups_[stores_[l.il].group].blocks_per_sequence);
    for (SlotView& v : views_[l.il]) {
      HR_ASSIGN_OR_RETURN(v.device_k_blocks, make(blocks * sizeof(const uint8_t*)));
      HR_ASSIGN_OR_RETURN(v.device_v_blocks, make(blocks * sizeof(const uint8_t*)));
      HR_ASSIGN_OR_RETURN(v.device_span, make(sizeof(kernels::KvSpan)));
    }
  }
  return {};
}

void Cache::take_changes(std::vector<ViewChange>& out) {
  if (device_ == nullptr) return;
  for (int slot = 0; slot < config_.n_slots; ++slot) {
    for (size_t g = 0; g < groups_.size(); ++g) {
      auto& [first, last] = cells_changed_[g][slot];
      if (first < last) {
        out.push_back({.dst = device_cell_pos_[g][slot].get<int32_t>() + first,
                       .src = cell_pos_[g][slot].data() + first,
                       .bytes = static_cast<size_t>(last - first) * sizeof(int32_t)});
      }
      first = last = 0;
      TableChange& change = tables_changed_[g][slot];
      for (int il : group_layers_[g]) {
        if (!on_device(il)) continue;
        SlotView& v = views_[il][slot];
        const size_t first_entry = static_cast<size_t>(change.first_entry);
        if (first_entry < v.k_blocks.size()) {
          const size_t bytes = (v.k_blocks.size() - first_entry) * sizeof(const uint8_t*);
          out.push_back({.dst = v.device_k_blocks.get<const uint8_t*>() + first_entry,
                         .src = v.k_blocks.data() + first_entry,
                         .bytes = bytes});
          out.push_back({.dst = v.device_v_blocks.get<const uint8_t*>() + first_entry,
                         .src = v.v_blocks.data() + first_entry,
                         .bytes = bytes});
        }
        if (!change.span) continue;
        v.device_form = v.span;
        v.device_form.k_blocks = v.device_k_blocks.get<const uint8_t* const>();
        v.device_form.v_blocks = v.device_v_blocks.get<const uint8_t* const>();
        v.device_form.cell_pos = device_cell_pos_[g][slot].get<const int32_t>();
        out.push_back(
            {.dst = v.device_span.get(), .src = &v.device_form, .bytes = sizeof(v.device_form)});
      }
      change = {};
    }
  }
}

int Cache::cell_of(int group, int32_t pos) const {
  const GroupGeometry& g = groups_[group];
  if (!g.sliding) return pos;
  return pos % g.cells_per_sequence;
}

int Cache::blocks_wanted(int group, int slot, int n_positions) const {
  const Slot& s = slots_[slot];
  if (!groups_[group].sliding) {
    return std::max(
        0, div_up(n_positions, config_.block_cells) - static_cast<int>(s.blocks[group].size()));
  }
  if (n_positions <= 0) return 0;
  const auto& ring = s.blocks[group];
  if (ring.empty()) return groups_[group].blocks_per_sequence;
  return static_cast<int>(std::count(ring.begin(), ring.end(), -1));
}

bool Cache::can_reserve(int slot, int n_positions, int spare) const {
  if (slot < 0 || slot >= config_.n_slots || n_positions > config_.n_ctx) return false;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int gi = static_cast<int>(g);
    // Sliding groups always have a ring for every slot: spares matter to full groups only.
    const int keep = groups_[g].sliding ? 0 : spare;
    if (blocks_wanted(gi, slot, n_positions) + keep > blocks_.available(gi)) return false;
  }
  return true;
}

bool Cache::reserve(int slot, int n_positions) {
  if (!can_reserve(slot, n_positions)) return false;
  Slot& s = slots_[slot];
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int gi = static_cast<int>(g);
    if (blocks_wanted(gi, slot, n_positions) == 0) continue;
    auto& table = s.blocks[g];
    auto& cells = cell_pos_[g][slot];
    if (groups_[g].sliding) {
      if (table.empty()) {
        table.assign(groups_[g].blocks_per_sequence, -1);
        s.logical[g].assign(table.size(), -1);
        cells.assign(groups_[g].cells_per_sequence, -1);
      }
      for (auto& b : table) {
        if (b < 0) b = blocks_.take(gi);
      }
      refresh_views(gi, slot, 0);
    } else {
      const int first_new = static_cast<int>(table.size());
      const int want = div_up(n_positions, config_.block_cells);
      while (static_cast<int>(table.size()) < want) table.push_back(blocks_.take(gi));
      cells.resize(table.size() * config_.block_cells, -1);
      refresh_views(gi, slot, first_new);
    }
  }
  s.reserved = std::max(s.reserved, n_positions);
  return true;
}

void Cache::release(int slot) {
  if (slot < 0 || slot >= config_.n_slots) return;
  Slot& s = slots_[slot];
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int gi = static_cast<int>(g);
    auto& table = s.blocks[g];
    if (groups_[g].sliding) {
      // The newest blocks of positions are released last, so they are evicted last: they hold
      // the window a continuation of this sequence needs.
      std::vector<int> entries(table.size());
      for (size_t j = 0; j < entries.size(); ++j) entries[j] = static_cast<int>(j);
      std::sort(entries.begin(), entries.end(),
                [&](int a, int b) { return s.logical[g][a] < s.logical[g][b]; });
      for (int j : entries) {
        if (table[j] >= 0) blocks_.drop(gi, table[j]);
      }
    } else {
      // The deepest blocks first, so a shared prefix outlives the tails that branch from it.
      for (auto it = table.rbegin(); it != table.rend(); ++it) blocks_.drop(gi, *it);
    }
    table.clear();
    s.logical[g].clear();
    cell_pos_[g][slot].clear();
  }
  s.nodes.clear();
  s.indexing = true;
  s.reserved = 0;
  for (size_t g = 0; g < groups_.size(); ++g) refresh_views(static_cast<int>(g), slot, 0);
}

int Cache::longest_reusable(std::span<const int32_t> tokens, uint64_t context,
                            std::vector<int32_t>& nodes) const {
  const int bc = config_.block_cells;
  nodes.clear();
  if (blocks_.anchor() < 0) return 0;
  // At least the last token is evaluated: its logits are what the caller samples from.
  const int most = (static_cast<int>(tokens.size()) - 1) / bc;
  for (int i = 0; i < most; ++i) {
    const int32_t parent = i == 0 ? BlockManager::kRoot : nodes.back();
    const int32_t node =
        blocks_.find(parent, tokens.subspan(static_cast<size_t>(i) * bc, bc), context);
    if (node < 0) break;
    nodes.push_back(node);
  }
  // Sliding groups need the blocks of the window before the first evaluated position P = k·bc:
  // positions [P − W + 1, P). Shorten the prefix until every one of them is cached.
  int k = static_cast<int>(nodes.size());
  for (; k > 0; --k) {
    bool held = true;
    for (size_t g = 0; g < groups_.size() && held; ++g) {
      if (!groups_[g].sliding) continue;
      const int first = std::max(0, k * bc - groups_[g].window + 1) / bc;
      for (int i = first; i < k && held; ++i)
        held = blocks_.block_of(nodes[i], static_cast<int>(g)) >= 0;
    }
    if (held) break;
  }
  nodes.resize(k);
  return k;
}

int Cache::reuse_prefix(int slot, std::span<const int32_t> tokens, uint64_t context) {
  Slot& s = slots_[slot];
  assert(s.reserved == 0 && s.nodes.empty());
  const int k = longest_reusable(tokens, context, s.nodes);
  if (k == 0) return 0;
  const int bc = config_.block_cells;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int gi = static_cast<int>(g);
    const GroupGeometry& geo = groups_[g];
    if (geo.sliding) {
      s.blocks[g].assign(geo.blocks_per_sequence, -1);
      s.logical[g].assign(geo.blocks_per_sequence, -1);
      cell_pos_[g][slot].assign(geo.cells_per_sequence, -1);
      const int first = std::max(0, k * bc - geo.window + 1) / bc;
      for (int i = first; i < k; ++i) {
        attach_block(gi, slot, i % geo.blocks_per_sequence, blocks_.block_of(s.nodes[i], gi), i);
      }
    } else {
      cell_pos_[g][slot].assign(static_cast<size_t>(k) * bc, -1);
      for (int i = 0; i < k; ++i) {
        s.blocks[g].push_back(-1);
        attach_block(gi, slot, i, blocks_.block_of(s.nodes[i], gi), i);
      }
    }
  }
  s.reserved = k * bc;
  for (size_t g = 0; g < groups_.size(); ++g) refresh_views(static_cast<int>(g), slot, 0);
  return k * bc;
}

// A cached block enters `entry` of a slot's table (or ring) holding positions of block `logical`.
void Cache::attach_block(int group, int slot, int entry, int32_t block, int logical) {
  Slot& s = slots_[slot];
  blocks_.hold(group, block);
  s.blocks[group][entry] = block;
  if (groups_[group].sliding) s.logical[group][entry] = logical;
  const int bc = config_.block_cells;
  int32_t* cells = cell_pos_[group][slot].data() + static_cast<size_t>(entry) * bc;
  for (int c = 0; c < bc; ++c) cells[c] = logical * bc + c;
}

void Cache::commit(int slot, std::span<const int32_t> tokens, int n_computed, uint64_t context) {
  Slot& s = slots_[slot];
  const int anchor = blocks_.anchor();
  if (anchor < 0 || !s.indexing) return;
  const int bc = config_.block_cells;
  for (int i = static_cast<int>(s.nodes.size()); (i + 1) * bc <= n_computed; ++i) {
    const int32_t parent = i == 0 ? BlockManager::kRoot : s.nodes.back();
    const int32_t block = s.blocks[anchor][i];
    if (!blocks_.insert(parent, tokens.subspan(static_cast<size_t>(i) * bc, bc), block, context)) {
      s.indexing = false;  // cached already by another sequence: this copy stays private
      return;
    }
    s.nodes.push_back(block);
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (!groups_[g].sliding) continue;
      const int entry = i % groups_[g].blocks_per_sequence;
      if (s.logical[g][entry] == i) blocks_.attach(block, static_cast<int>(g), s.blocks[g][entry]);
    }
  }
}

void Cache::point_views(int group, int slot, int entry) {
  const int32_t block = slots_[slot].blocks[group][entry];
  for (int il : group_layers_[group]) {
    const LayerStore& st = stores_[il];
    SlotView& v = views_[il][slot];
    // A ring entry not taken yet points at block 0: its cells hold no position, so attention
    // never reads it.
    const size_t first_cell = static_cast<size_t>(std::max(block, 0)) * config_.block_cells;
    v.k_blocks[entry] = st.k_base + first_cell * st.k_row;
    v.v_blocks[entry] = st.v_base + first_cell * st.v_row;
  }
  int& first = tables_changed_[group][slot].first_entry;
  first = std::min(first, entry);
}

void Cache::refresh_views(int group, int slot, int first_changed) {
  const auto& table = slots_[slot].blocks[group];
  const auto& cells = cell_pos_[group][slot];
  for (int il : group_layers_[group]) {
    SlotView& v = views_[il][slot];
    v.k_blocks.resize(table.size());
    v.v_blocks.resize(table.size());
    v.span.k_blocks = v.k_blocks.data();
    v.span.v_blocks = v.v_blocks.data();
    v.span.cell_pos = cells.data();
    v.span.n_cells = static_cast<int>(cells.size());
  }
  for (size_t j = first_changed; j < table.size(); ++j) {
    point_views(group, slot, static_cast<int>(j));
  }
  tables_changed_[group][slot].span = true;
  auto& [lo, hi] = cells_changed_[group][slot];  // a released slot has no cells left to upload
  hi = std::min(hi, static_cast<int>(cells.size()));
  if (lo >= hi) lo = hi = 0;
  // The cells of the entries that changed (a device keeps each slot's positions at their
  // longest: the others are current there).
  if (first_changed * config_.block_cells < static_cast<int>(cells.size())) {
    mark_cells(group, slot, first_changed * config_.block_cells, static_cast<int>(cells.size()));
  }
}

void Cache::mark_cells(int group, int slot, int first, int last) {
  auto& [lo, hi] = cells_changed_[group][slot];
  if (lo < hi) {
    lo = std::min(lo, first);
    hi = std::max(hi, last);
  } else {
    lo = first;
    hi = last;
  }
}

// Ring entry `entry` of a sliding group starts holding block of positions `logical`: its block is
// rewritten in place when only this slot holds it and nothing caches it, else replaced by a fresh
// one (the old one stays shared or cached).
void Cache::replace_ring_block(int group, int slot, int entry, int logical) {
  Slot& s = slots_[slot];
  int32_t& block = s.blocks[group][entry];
  assert(block >= 0);  // reserve() took the whole ring
  if (blocks_.refs(group, block) > 1 || blocks_.is_cached(group, block)) {
    blocks_.drop(group, block);
    block = blocks_.take(group);
    assert(block >= 0);  // the pool holds more than a ring per slot
    point_views(group, slot, entry);
  }
  s.logical[group][entry] = logical;
  const int bc = config_.block_cells;
  std::fill_n(cell_pos_[group][slot].begin() + static_cast<ptrdiff_t>(entry) * bc, bc, -1);
  mark_cells(group, slot, entry * bc, (entry + 1) * bc);
}

void Cache::set_position(int slot, int32_t pos) {
  const int bc = config_.block_cells;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int gi = static_cast<int>(g);
    if (groups_[g].sliding) {
      const int logical = pos / bc;
      const int entry = logical % groups_[g].blocks_per_sequence;
      if (slots_[slot].logical[g][entry] != logical) replace_ring_block(gi, slot, entry, logical);
    }
    const int cell = cell_of(gi, pos);
    cell_pos_[g][slot][cell] = pos;
    mark_cells(gi, slot, cell, cell + 1);
  }
}

kernels::KvWrite Cache::destination(int il, int slot, int32_t pos) {
  LayerStore& s = stores_[il];
  const int cell = cell_of(s.group, pos);
  const int32_t block = slots_[slot].blocks[s.group][cell / config_.block_cells];
  const size_t index =
      static_cast<size_t>(block) * config_.block_cells + cell % config_.block_cells;
  return {s.k_base + index * s.k_row, s.v_base + index * s.v_row};
}

const kernels::KvSpan* Cache::span(int il, int slot) const {
  const SlotView& v = views_[layers_[il].source][slot];
  return on_device(il) ? v.device_span.get<const kernels::KvSpan>() : &v.span;
}

std::vector<PoolUsage> Cache::usage() const {
  std::vector<PoolUsage> out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int gi = static_cast<int>(g);
    out.push_back({.sliding = groups_[g].sliding,
                   .n_blocks = groups_[g].n_blocks,
                   .held = blocks_.held(gi),
                   .cached = blocks_.cached(gi),
                   .bytes_per_block = groups_[g].bytes_per_block});
  }
  return out;
}

int Cache::available_positions() const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (!groups_[g].sliding) return blocks_.available(static_cast<int>(g)) * config_.block_cells;
  }
  return config_.n_ctx * config_.n_slots;  // sliding rings only: every slot has its ring
}

size_t Cache::bytes_allocated() const {
  size_t total = 0;
  for (const auto& s : stores_)
    total += s.k.size() + s.v.size() + s.device_k.size() + s.device_v.size();
  return total;
}

size_t Cache::bytes_resident() const {
  size_t total = 0;
  for (const auto& s : stores_) {
    // Device memory is committed when allocated; host pages only once touched.
    total += util::resident_bytes(s.k.data(), s.k.size()) +
             util::resident_bytes(s.v.data(), s.v.size()) + s.device_k.size() + s.device_v.size();
  }
  return total;
}

size_t Cache::bytes_in_use() const {
  size_t total = 0;
  for (const auto& u : usage()) total += static_cast<size_t>(u.held) * u.bytes_per_block;
  return total;
}

size_t Cache::bytes_cached() const {
  size_t total = 0;
  for (const auto& u : usage()) total += static_cast<size_t>(u.cached) * u.bytes_per_block;
  return total;
}

}  // namespace kv
