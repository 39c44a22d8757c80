// kv::BlockManager: reference counts, free and evictable blocks, least-recently-released eviction
// (anchor leaves first) and the exact prefix index.
#include "kv/blocks.h"

#include <gtest/gtest.h>

#include <numeric>

namespace {

constexpr int kCells = 4;

std::vector<int32_t> block(int first) {
  std::vector<int32_t> t(kCells);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(KvBlocks, TakeHoldDropCountEveryBlock) {
  kv::BlockManager m({3}, -1, kCells);
  EXPECT_EQ(m.available(0), 3);
  const int32_t a = m.take(0), b = m.take(0), c = m.take(0);
  EXPECT_EQ(a, 0);           // low ids first
  EXPECT_EQ(m.take(0), -1);  // empty: the pool never grows
  EXPECT_EQ(m.held(0), 3);
  m.drop(0, b);
  EXPECT_EQ(m.available(0), 1);
  EXPECT_EQ(m.take(0), b);
  m.drop(0, a);
  m.drop(0, c);
  EXPECT_EQ(m.cached(0), 0);  // without an index nothing is cached
}

TEST(KvBlocks, APrefixIsFoundExactlyAndSharedByReference) {
  kv::BlockManager m({4}, 0, kCells);
  const int32_t a = m.take(0), b = m.take(0);
  ASSERT_TRUE(m.insert(kv::BlockManager::kRoot, block(0), a));
  ASSERT_TRUE(m.insert(a, block(4), b));
  const int32_t copy = m.take(0);
  EXPECT_FALSE(m.insert(kv::BlockManager::kRoot, block(0), copy));  // exists already
  m.drop(0, copy);  // an uncached copy is simply free again
  EXPECT_EQ(m.find(kv::BlockManager::kRoot, block(0)), a);
  EXPECT_EQ(m.find(a, block(4)), b);
  EXPECT_EQ(m.find(kv::BlockManager::kRoot, block(4)), -1);  // same tokens, other parent
  EXPECT_EQ(m.find(b, block(4)), -1);
  std::vector<int32_t> other = block(4);
  other[3] = 99;
  EXPECT_EQ(m.find(a, other), -1);  // one token differs
  // A second sequence shares the cached blocks: both hold them; neither is evictable.
  m.hold(0, a);
  m.drop(0, a);
  m.drop(0, b);
  EXPECT_EQ(m.refs(0, a), 1);
  EXPECT_EQ(m.available(0), 3);  // b (cached, idle) and two free blocks; a is still held
  m.drop(0, a);
  EXPECT_EQ(m.cached(0), 2);
  EXPECT_EQ(m.available(0), 4);
}

// Cached blocks no sequence holds are reused least recently released first, and an anchor node
// only once its children are gone: a reachable prefix never loses a block it needs.
TEST(KvBlocks, EvictionIsLeastRecentlyReleasedAndLeavesFirst) {
  kv::BlockManager m({4}, 0, kCells);
  // Chain root → x → y (one sequence), and root → z (another).
  const int32_t x = m.take(0), y = m.take(0), z = m.take(0);
  ASSERT_TRUE(m.insert(kv::BlockManager::kRoot, block(0), x));
  ASSERT_TRUE(m.insert(x, block(4), y));
  ASSERT_TRUE(m.insert(kv::BlockManager::kRoot, block(100), z));
  m.drop(0, x);  // x released first, but it has a child: not evictable before y
  m.drop(0, z);
  m.drop(0, y);
  const int32_t free_block = m.take(0);
  EXPECT_NE(free_block, x);
  EXPECT_NE(free_block, y);
  EXPECT_NE(free_block, z);  // the never-used block comes first
  EXPECT_EQ(m.take(0), z);   // z, released before y, is the least recent leaf
  EXPECT_EQ(m.find(kv::BlockManager::kRoot, block(100)), -1);
  EXPECT_EQ(m.take(0), y);  // then the leaf y, after which x is a leaf
  EXPECT_EQ(m.take(0), x);
  EXPECT_EQ(m.n_nodes(), 0);
  EXPECT_EQ(m.take(0), -1);
}

// A node's blocks in other groups (a sliding window's copy) are cached with it, evicted on their
// own by LRU, and freed with the node.
TEST(KvBlocks, OtherGroupsCacheWithTheNodeAndGoWithIt) {
  kv::BlockManager m({2, 2}, 0, kCells);
  const int32_t node = m.take(0), window = m.take(1);
  ASSERT_TRUE(m.insert(kv::BlockManager::kRoot, block(0), node));
  ASSERT_TRUE(m.attach(node, 1, window));
  EXPECT_FALSE(m.attach(node, 1, m.take(1)));  // one copy per group
  EXPECT_EQ(m.block_of(node, 1), window);
  m.drop(0, node);
  m.drop(1, window);
  EXPECT_EQ(m.available(1), 1);  // the other block is still held
  // The node goes when the anchor group needs its block: its window copy becomes free.
  m.take(0);
  EXPECT_EQ(m.take(0), node);
  EXPECT_EQ(m.cached(1), 0);
  EXPECT_EQ(m.available(1), 1);
  EXPECT_EQ(m.take(1), window);
}

TEST(KvBlocks, AWindowBlockIsEvictedWithoutItsNode) {
  kv::BlockManager m({2, 1}, 0, kCells);
  const int32_t node = m.take(0), window = m.take(1);
  ASSERT_TRUE(m.insert(kv::BlockManager::kRoot, block(0), node));
  ASSERT_TRUE(m.attach(node, 1, window));
  m.drop(1, window);
  EXPECT_EQ(m.take(1), window);  // evicted from the sliding group alone
  EXPECT_EQ(m.block_of(node, 1), -1);
  EXPECT_EQ(m.find(kv::BlockManager::kRoot, block(0)), node);  // the node stays
}

}  // namespace
