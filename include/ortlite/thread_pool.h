// A small work-sharing pool. parallel_for may be called from many threads at once (several
// runs of one session) and from inside a task: the caller always works on its own chunks,
// so nesting cannot deadlock.
//
// fork: a child process has none of the parent's worker threads. fork handlers put every
// pool into a state the child rebuilds on first use (new workers; the parent's queued
// work is the parent's and is dropped), and a pool made in the parent can be destroyed
// in the child without joining threads that do not exist there.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ortlite {

class ThreadPool {
 public:
  // `num_threads` counts the calling thread: 1 means no worker threads. With
  // `allow_spinning`, an idle worker (and a caller waiting for its helpers) polls for up to
  // a millisecond before it blocks; without, it blocks at once (onnxruntime's
  // session.intra_op.allow_spinning = "0": no CPU burnt between runs).
  explicit ThreadPool(int num_threads, bool allow_spinning = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(begin, end) over disjoint ranges covering [0, n); returns when all are done.
  // The first exception thrown by fn is rethrown here. Ranges are about n / (4 threads)
  // long, and at most `max_chunk` when it is > 0 (items that are each long enough to be
  // worth claiming one by one: finer ranges even out the threads' finishing times).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t max_chunk = 0);
  // The same for any callable, held by reference (no std::function of a lambda's captures
  // is allocated per call).
  template <typename Fn, typename = std::enable_if_t<!std::is_same_v<
                             std::decay_t<Fn>, std::function<void(int64_t, int64_t)>>>>
  void parallel_for(int64_t n, const Fn& fn, int64_t max_chunk = 0) {
    parallel_for(n, std::function<void(int64_t, int64_t)>(std::cref(fn)), max_chunk);
  }

  // Queues a task for a worker thread (used by async runs). Runs inline when the pool has
  // no workers.
  void schedule(std::function<void()> task);

  // The fork handlers (thread_pool.cc).
  void before_fork();
  void after_fork_in_parent();
  void after_fork_in_child();

 private:
  struct Job;  // one parallel_for's shared state (thread_pool.cc), reused through free_jobs_
  Job* acquire_job();
  void release_job(Job* job);
  void free_jobs();
  void worker_loop();
  void start_workers_after_fork();
  int num_threads_ = 1;
  bool allow_spinning_ = true;
  std::atomic<bool> workers_lost_{false};  // set in a forked child until workers restart
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::atomic<int> queued_{0};  // queue_.size(), readable without the lock (spinning workers)
  int sleepers_ = 0;            // workers blocked on cv_ (guarded by mu_)
  bool stop_ = false;
  std::mutex jobs_mu_;
  std::vector<Job*> free_jobs_;  // guarded by jobs_mu_; deleted with the pool
};

// Splits [0, n) for `pool` (may be null: runs serially). `cost` is a rough count of
// operations per item; small totals (under ~64k operations) run on the calling thread
// alone, calling fn directly (no std::function is made, so nothing is allocated).
template <typename Fn>
void parallel_for(ThreadPool* pool, int64_t n, double cost, const Fn& fn) {
  if (n <= 0) return;
  if (!pool || pool->num_threads() == 1 || static_cast<double>(n) * cost < 65536.0) {
    fn(int64_t{0}, n);
    return;
  }
  pool->parallel_for(n, std::function<void(int64_t, int64_t)>(std::cref(fn)));
}

}  // namespace ortlite
