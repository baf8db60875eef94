// ThreadPool::parallel_for under stress, built by test_thread_pool.py against
// src/core/thread_pool.cc alone: every index exactly once for many sizes and chunk limits,
// the first exception rethrown and the pool usable after it, nested calls, and several
// threads calling at once (the jobs are reused between calls, and a helper may start after
// its caller returned). Prints "ok" and exits 0, or names the first failure and exits 1.
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ortlite/thread_pool.h"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok && failures++ == 0) std::printf("FAILED: %s\n", what.c_str());
}

void coverage(ortlite::ThreadPool& pool, const std::string& tag) {
  for (int64_t n : {1, 2, 3, 7, 16, 63, 64, 1000, 4099}) {
    for (int64_t max_chunk : {0, 1, 5}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(
          n,
          [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          },
          max_chunk);
      bool once = true;
      for (auto& h : hits) once = once && h.load() == 1;
      expect(once,
             tag + " coverage n=" + std::to_string(n) + " max_chunk=" + std::to_string(max_chunk));
    }
  }
}

void exceptions(ortlite::ThreadPool& pool, const std::string& tag) {
  for (int round = 0; round < 200; ++round) {
    bool caught = false;
    try {
      pool.parallel_for(100, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          if (i == 57) throw std::runtime_error("item 57");
      });
    } catch (const std::runtime_error& err) {
      caught = std::string(err.what()) == "item 57";
    }
    expect(caught, tag + " exception rethrown");
    // The next call on the same pool (and likely the same reused job) has no stale error.
    std::atomic<int64_t> sum{0};
    pool.parallel_for(50, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
    expect(sum.load() == 49 * 50 / 2, tag + " call after an exception");
  }
}

void nested(ortlite::ThreadPool& pool, const std::string& tag) {
  std::atomic<int64_t> sum{0};
  pool.parallel_for(8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(33, [&](int64_t bb, int64_t ee) {
        for (int64_t j = bb; j < ee; ++j) sum += j + 1;
      });
  });
  expect(sum.load() == 8 * (33 * 34 / 2), tag + " nested");
}

void concurrent(ortlite::ThreadPool& pool, const std::string& tag) {
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int r = 0; r < 3000; ++r) {
        std::atomic<int64_t> sum{0};
        const int64_t n = 1 + (r * 7 + t) % 40;
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) sum += i;
        });
        if (sum.load() != n * (n - 1) / 2) total += 1000000;
        total += 1;
      }
    });
  for (auto& c : callers) c.join();
  expect(total.load() == 4 * 3000, tag + " concurrent callers");
}

}  // namespace

int main() {
  for (int threads : {2, 3, 4}) {
    for (bool spin : {true, false}) {
      const std::string tag = std::to_string(threads) + " threads" + (spin ? "" : " no spin");
      ortlite::ThreadPool pool(threads, spin);
      coverage(pool, tag);
      exceptions(pool, tag);
      nested(pool, tag);
      concurrent(pool, tag);
    }
  }
  if (failures) return 1;
  std::printf("ok\n");
  return 0;
}
