// FlatMap: an open-addressing hash map from uint64 keys, for the tokenizers' hot lookups.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace tokenizer {

// Linear probing over a power-of-two table; never shrinks, no erase. Built once at load time and
// then only read, so concurrent lookups are safe. Lookups for merges and trie edges run per
// character, where std::unordered_map's node chasing dominated the time.
template <class V>
class FlatMap {
 public:
  static constexpr uint64_t kEmpty = std::numeric_limits<uint64_t>::max();

  // Inserts or overwrites. `key` must not be kEmpty.
  void insert(uint64_t key, V value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    size_t i = slot_of(key);
    if (slots_[i].key == kEmpty) ++size_;
    slots_[i] = {key, value};
  }

  // The value stored for key, or nullptr.
  const V* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key = kEmpty;
    V value{};
  };

  static size_t hash(uint64_t key) {
    key ^= key >> 33;  // the murmur3 finalizer: cheap and mixes the high bits into the low ones
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ULL;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }

  size_t slot_of(uint64_t key) const {
    const size_t mask = slots_.size() - 1;
    size_t i = hash(key) & mask;
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask;
    return i;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != kEmpty) insert(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace tokenizer
