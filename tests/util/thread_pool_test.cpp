#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <vector>

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    util::ThreadPool pool(threads);
    for (int n : {0, 1, 2, 3, 17, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> bad_thread{0};
      pool.parallel_for(n, [&](int task, int thread) {
        hits[task].fetch_add(1);
        if (thread < 0 || thread >= pool.size()) bad_thread.fetch_add(1);
      });
      for (int i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "threads " << threads << " task " << i;
      EXPECT_EQ(bad_thread.load(), 0);
    }
  }
}

TEST(ThreadPool, ManyShortCallsAndIdleWakeups) {
  util::ThreadPool pool(3);
  std::vector<int64_t> partial(3);
  for (int round = 0; round < 2000; ++round) {
    std::fill(partial.begin(), partial.end(), 0);
    pool.parallel_for(64, [&](int task, int thread) { partial[thread] += task; });
    ASSERT_EQ(std::accumulate(partial.begin(), partial.end(), int64_t{0}), 64 * 63 / 2);
    if (round % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // workers go to sleep
  }
}
