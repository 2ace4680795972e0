// HelperTeam: every item of a run() is done exactly once, items run on helpers beside the caller,
// and callers running at once (a scheduler's lanes) each get all of their own items done.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "scheduling/helper_team.h"

namespace speakerseg {
namespace {

TEST(HelperTeam, EveryItemRunsOnce) {
  for (int helpers : {0, 1, 3}) {
    HelperTeam team(helpers);
    EXPECT_EQ(team.helpers(), helpers);
    for (int n : {0, 1, 2, 1000}) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      team.run(n, [&](int i) { runs[static_cast<size_t>(i)].fetch_add(1); });
      for (int i = 0; i < n; ++i)
        EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 1)
            << "item " << i << " of " << n << ", " << helpers << " helpers";
    }
  }
}

// Item 0 returns only once item 1 has begun: with helpers the run ends; were the items run one
// after another it would fail after 60 s instead of hanging.
TEST(HelperTeam, ItemsRunBesideTheCaller) {
  HelperTeam team(1);
  std::mutex m;
  std::condition_variable cv;
  bool second_began = false, met = false;
  std::set<std::thread::id> threads;
  team.run(2, [&](int i) {
    std::unique_lock<std::mutex> lock(m);
    threads.insert(std::this_thread::get_id());
    if (i == 1) {
      second_began = true;
      cv.notify_all();
    } else {
      met = cv.wait_for(lock, std::chrono::seconds(60), [&] { return second_began; });
    }
  });
  EXPECT_TRUE(met);
  EXPECT_EQ(threads.size(), 2u);
}

// An item that throws: the other items still run, and run() rethrows once they are all done,
// with helpers or without; the team goes on serving.
TEST(HelperTeam, AnItemThatThrowsFailsTheRunAfterTheOthers) {
  for (int helpers : {0, 2}) {
    HelperTeam team(helpers);
    std::vector<std::atomic<int>> runs(100);
    EXPECT_THROW(team.run(100,
                          [&](int i) {
                            runs[static_cast<size_t>(i)].fetch_add(1);
                            if (i % 10 == 3) throw std::runtime_error("item " + std::to_string(i));
                          }),
                 std::runtime_error)
        << helpers << " helpers";
    for (int i = 0; i < 100; ++i)
      EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "item " << i << ", " << helpers;
    int later = 0;
    team.run(10, [&](int) {
      static std::mutex m;
      std::lock_guard<std::mutex> lock(m);
      ++later;
    });
    EXPECT_EQ(later, 10);
  }
}

TEST(HelperTeam, CallersAtOnceEachGetTheirOwnItems) {
  HelperTeam team(2);
  std::vector<std::thread> callers;
  std::vector<long long> sums(3, 0);
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&, c] {
      for (int round = 0; round < 200; ++round) {
        std::vector<int> value(50, 0);
        team.run(50, [&](int i) { value[static_cast<size_t>(i)] = (c + 1) * (i + 1); });
        for (int v : value) sums[static_cast<size_t>(c)] += v;
      }
    });
  for (auto& t : callers) t.join();
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(sums[static_cast<size_t>(c)], 200LL * (c + 1) * (50 * 51 / 2)) << "caller " << c;
}

}  // namespace
}  // namespace speakerseg
