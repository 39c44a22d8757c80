// Paged KV storage: block pools per group, block tables per sequence, exact per-cell positions.
#include "kv/cache.h"

#include <algorithm>

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

}  // namespace

util::Result<std::vector<GroupGeometry>> plan_groups(const std::vector<LayerGeometry>& layers,
                                                     const CacheConfig& config) {
  if (config.n_ctx <= 0 || config.n_slots <= 0 || config.n_ubatch <= 0 || config.block_cells <= 0) {
    return util::errorf("KV cache: context {}, slots {}, micro-batch {} must all be positive",
                        config.n_ctx, config.n_slots, config.n_ubatch);
  }
  std::vector<GroupGeometry> groups;
  for (const auto& l : layers) {
    if (!l.owns()) continue;
    HR_TRY(check_cache_type(config.k_type, l.kv_dim(), "K"));
    HR_TRY(check_cache_type(config.v_type, l.kv_dim(), "V"));
    int g = group_of(groups, l);
    if (g < 0) {
      GroupGeometry geo;
      geo.sliding = l.sliding;
      geo.window = l.sliding ? l.window : 0;
      geo.cells_per_sequence = l.cells_per_sequence(config.n_ctx, config.n_ubatch);
      geo.blocks_per_sequence = div_up(geo.cells_per_sequence, config.block_cells);
      geo.n_blocks = geo.blocks_per_sequence * config.n_slots;
      if (!geo.sliding && config.n_full_blocks > 0) geo.n_blocks = config.n_full_blocks;
      groups.push_back(geo);
      g = static_cast<int>(groups.size()) - 1;
    }
    groups[g].bytes_per_block +=
        static_cast<size_t>(config.block_cells) *
        (row_bytes(config.k_type, l.kv_dim()) + row_bytes(config.v_type, l.kv_dim()));
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

util::Result<size_t> bookkeeping_bytes(const std::vector<LayerGeometry>& layers,
                                       const CacheConfig& config) {
  HR_ASSIGN_OR_RETURN(auto groups, plan_groups(layers, config));
  size_t total = 0;
  for (const auto& g : groups) {
    const size_t blocks = static_cast<size_t>(g.blocks_per_sequence) * config.n_slots;
    total += blocks * sizeof(int32_t);                       // block tables
    total += blocks * config.block_cells * sizeof(int32_t);  // cell positions
  }
  for (const auto& l : layers) {
    if (!l.owns()) continue;
    for (const auto& g : groups) {
      if (g.sliding == l.sliding && g.window == (l.sliding ? l.window : 0)) {
        total += static_cast<size_t>(g.blocks_per_sequence) * config.n_slots * 2 *
                 sizeof(void*);  // block pointers
      }
    }
  }
  return total;
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
                                  kernels::Backend* device, int first_device_layer) {
  Cache c;
  c.device_ = device;
  c.first_device_layer_ = first_device_layer;
  HR_ASSIGN_OR_RETURN(c.groups_, plan_groups(layers, config));
  c.layers_ = std::move(layers);
  c.config_ = config;
  for (const auto& l : c.layers_) {
    if (l.owns() || l.source < 0 || l.source >= static_cast<int>(c.layers_.size())) continue;
    if ((l.il >= first_device_layer) != (l.source >= first_device_layer) && device != nullptr) {
      return util::errorf(
          "KV cache: layer {} reads layer {}'s cache, and the split at layer {} puts one on the "
          "host and the other on {} — split before layer {} or after layer {}",
          l.il, l.source, first_device_layer, device->name(), std::min(l.il, l.source),
          std::max(l.il, l.source));
    }
  }
  c.stores_.resize(c.layers_.size());
  for (const auto& l : c.layers_) {
    if (!l.owns()) continue;
    LayerStore& s = c.stores_[l.il];
    s.group = group_of(c.groups_, l);
    s.k_row = row_bytes(config.k_type, l.kv_dim());
    s.v_row = row_bytes(config.v_type, l.kv_dim());
    const size_t cells = static_cast<size_t>(c.groups_[s.group].n_blocks) * config.block_cells;
    if (c.on_device(l.il)) {
      auto k = kernels::Buffer::make(*device, cells * s.k_row);
      auto v = kernels::Buffer::make(*device, cells * s.v_row);
      if (!k || !v) {
        return util::errorf(
            "KV cache: cannot allocate {} bytes for layer {} on {} — lower --ctx or --slots, or "
            "use a quantized KV type",
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
          "KV cache: cannot allocate {} bytes for layer {} — lower --ctx or --slots, or use a "
          "quantized KV type",
          cells * (s.k_row + s.v_row), l.il);
    }
    s.k_base = s.k.data();
    s.v_base = s.v.data();
  }
  for (const auto& l : c.layers_) {
    if (!l.owns() && (l.source < 0 || l.source >= static_cast<int>(c.layers_.size()) ||
                      !c.layers_[l.source].owns())) {
      return util::errorf("KV cache: layer {} reads layer {}, which owns no cache", l.il, l.source);
    }
  }
  c.free_.resize(c.groups_.size());
  c.tables_.resize(c.groups_.size());
  c.cell_pos_.resize(c.groups_.size());
  for (size_t g = 0; g < c.groups_.size(); ++g) {
    // Pop from the back: hand out low block ids first, which keeps a lone sequence contiguous.
    for (int b = c.groups_[g].n_blocks - 1; b >= 0; --b) c.free_[g].push_back(b);
    c.tables_[g].resize(config.n_slots);
    c.cell_pos_[g].resize(config.n_slots);
  }
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
  c.reserved_.assign(config.n_slots, 0);
  c.tables_changed_.assign(config.n_slots, 1);
  c.cells_changed_.assign(c.groups_.size(),
                          std::vector<std::pair<int, int>>(config.n_slots, {0, 0}));
  if (device != nullptr) HR_TRY(c.allocate_device_views());
  return c;
}

util::Status Cache::allocate_device_views() {
  auto make = [&](size_t bytes) { return kernels::Buffer::make(*device_, bytes); };
  device_cell_pos_.resize(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    const size_t cells = static_cast<size_t>(groups_[g].blocks_per_sequence) * config_.block_cells;
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

util::Status Cache::sync() {
  if (device_ == nullptr) return {};
  for (int slot = 0; slot < config_.n_slots; ++slot) {
    for (size_t g = 0; g < groups_.size(); ++g) {
      auto& [first, last] = cells_changed_[g][slot];
      if (first < last) {
        HR_TRY(device_->upload(device_cell_pos_[g][slot].get<int32_t>() + first,
                               cell_pos_[g][slot].data() + first,
                               static_cast<size_t>(last - first) * sizeof(int32_t)));
      }
      first = last = 0;
    }
    if (tables_changed_[slot]) {
      for (const auto& l : layers_) {
        if (!l.owns() || !on_device(l.il)) continue;
        SlotView& v = views_[l.il][slot];
        HR_TRY(device_->upload(v.device_k_blocks.get(), v.k_blocks.data(),
                               v.k_blocks.size() * sizeof(const uint8_t*)));
        HR_TRY(device_->upload(v.device_v_blocks.get(), v.v_blocks.data(),
                               v.v_blocks.size() * sizeof(const uint8_t*)));
        kernels::KvSpan span = v.span;
        span.k_blocks = v.device_k_blocks.get<const uint8_t* const>();
        span.v_blocks = v.device_v_blocks.get<const uint8_t* const>();
        span.cell_pos = device_cell_pos_[stores_[l.il].group][slot].get<const int32_t>();
        HR_TRY(device_->upload(v.device_span.get(), &span, sizeof(span)));
      }
    }
    tables_changed_[slot] = 0;
  }
  return {};
}

int Cache::cell_of(int group, int32_t pos) const {
  const GroupGeometry& g = groups_[group];
  if (!g.sliding) return pos;
  return pos % (g.blocks_per_sequence * config_.block_cells);
}

bool Cache::reserve(int slot, int n_positions) {
  if (slot < 0 || slot >= config_.n_slots || n_positions > config_.n_ctx) return false;
  if (n_positions <= reserved_[slot]) return true;
  std::vector<int> need(groups_.size(), 0);
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int want = groups_[g].sliding ? groups_[g].blocks_per_sequence
                                        : div_up(n_positions, config_.block_cells);
    need[g] = std::max(0, want - static_cast<int>(tables_[g][slot].size()));
    if (need[g] > static_cast<int>(free_[g].size())) return false;
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    auto& table = tables_[g][slot];
    for (int i = 0; i < need[g]; ++i) {
      table.push_back(free_[g].back());
      free_[g].pop_back();
    }
    cell_pos_[g][slot].resize(table.size() * config_.block_cells, -1);
  }
  reserved_[slot] = n_positions;
  refresh_views(slot);
  return true;
}

void Cache::release(int slot) {
  if (slot < 0 || slot >= config_.n_slots) return;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (int32_t b : tables_[g][slot]) free_[g].push_back(b);
    tables_[g][slot].clear();
    cell_pos_[g][slot].clear();
  }
  reserved_[slot] = 0;
  refresh_views(slot);
}

void Cache::refresh_views(int slot) {
  for (const auto& l : layers_) {
    if (!l.owns()) continue;
    LayerStore& s = stores_[l.il];
    SlotView& v = views_[l.il][slot];
    const auto& table = tables_[s.group][slot];
    v.k_blocks.resize(table.size());
    v.v_blocks.resize(table.size());
    const size_t block_k = static_cast<size_t>(config_.block_cells) * s.k_row;
    const size_t block_v = static_cast<size_t>(config_.block_cells) * s.v_row;
    for (size_t i = 0; i < table.size(); ++i) {
      v.k_blocks[i] = s.k_base + table[i] * block_k;
      v.v_blocks[i] = s.v_base + table[i] * block_v;
    }
    v.span.k_blocks = v.k_blocks.data();
    v.span.v_blocks = v.v_blocks.data();
    v.span.cell_pos = cell_pos_[s.group][slot].data();
    v.span.n_cells = static_cast<int>(cell_pos_[s.group][slot].size());
  }
  tables_changed_[slot] = 1;
  for (size_t g = 0; g < groups_.size(); ++g)
    cells_changed_[g][slot] = {0, static_cast<int>(cell_pos_[g][slot].size())};
}

void Cache::set_position(int slot, int32_t pos) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int cell = cell_of(static_cast<int>(g), pos);
    cell_pos_[g][slot][cell] = pos;
    auto& [first, last] = cells_changed_[g][slot];
    if (first < last) {
      first = std::min(first, cell);
      last = std::max(last, cell + 1);
    } else {
      first = cell;
      last = cell + 1;
    }
  }
}

kernels::KvWrite Cache::destination(int il, int slot, int32_t pos) {
  LayerStore& s = stores_[il];
  const int cell = cell_of(s.group, pos);
  const int32_t block = tables_[s.group][slot][cell / config_.block_cells];
  const size_t index =
      static_cast<size_t>(block) * config_.block_cells + cell % config_.block_cells;
  return {s.k_base + index * s.k_row, s.v_base + index * s.v_row};
}

const kernels::KvSpan* Cache::span(int il, int slot) const {
  const SlotView& v = views_[layers_[il].source][slot];
  return on_device(il) ? v.device_span.get<const kernels::KvSpan>() : &v.span;
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
  for (size_t g = 0; g < groups_.size(); ++g) {
    total += static_cast<size_t>(groups_[g].n_blocks - free_blocks(static_cast<int>(g))) *
             groups_[g].bytes_per_block;
  }
  return total;
}

}  // namespace kv
