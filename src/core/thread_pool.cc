#include "ortlite/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <new>
#include <pthread.h>
#include <sched.h>
#include <unordered_set>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ortlite {

namespace {

// How long an idle thread (a worker between tasks, a caller waiting for its helpers)
// polls before it blocks: a kernel's parallel_for usually follows the previous one within
// microseconds, but uneven task sizes or a short serial stretch leave a worker idle for
// 0.05-1 ms, and waking a blocked thread costs tens to hundreds of microseconds (more in a
// VM, where the idle vCPU has halted). With 50 us a 2-thread ResNet-18 run put its worker
// to sleep 8 times; with 1 ms, twice in 105 runs.
constexpr auto kSpin = std::chrono::microseconds(1000);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Polls `ready` for up to kSpin (not at all without `spin`); true when it became true.
template <typename Pred>
bool spin_until(const Pred& ready, bool spin = true) {
  if (!spin) return ready();
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
    // Lets another runnable thread have the core: on a loaded machine a spinning worker
    // would otherwise take its time from the thread it is waiting for (the caller, or a
    // worker holding the last chunk), and two threads ran slower than one.
    sched_yield();
  }
}

// Every live pool, for the fork handlers. Leaked on purpose (pools may outlive static
// destruction in threads still running at exit).
struct PoolRegistry {
  std::mutex mu;
  std::unordered_set<ThreadPool*> pools;
};
PoolRegistry& registry() {
  static PoolRegistry* r = new PoolRegistry();
  return *r;
}

// Before fork: the registry and every pool's lock are held, so the child's copy of each
// pool is consistent (no half-pushed queue). After: released in the parent, rebuilt in the
// child, which has only the forking thread.
void prepare_fork() {
  registry().mu.lock();
  for (ThreadPool* p : registry().pools) p->before_fork();
}
void parent_after_fork() {
  for (ThreadPool* p : registry().pools) p->after_fork_in_parent();
  registry().mu.unlock();
}
void child_after_fork() {
  for (ThreadPool* p : registry().pools) p->after_fork_in_child();
  new (&registry().mu) std::mutex();
}

void register_pool(ThreadPool* p) {
  static const int handlers = pthread_atfork(prepare_fork, parent_after_fork, child_after_fork);
  (void)handlers;
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().pools.insert(p);
}

void unregister_pool(ThreadPool* p) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().pools.erase(p);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, bool allow_spinning)
    : num_threads_(std::max(1, num_threads)), allow_spinning_(allow_spinning) {
  const int workers = num_threads_ - 1;
  if (workers > 0) register_pool(this);
  workers_.reserve(workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  if (num_threads_ > 1) unregister_pool(this);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  free_jobs();  // every queued helper has run and let go of its job
}

void ThreadPool::before_fork() {
  mu_.lock();
  jobs_mu_.lock();
}

void ThreadPool::after_fork_in_parent() {
  jobs_mu_.unlock();
  mu_.unlock();
}

void ThreadPool::after_fork_in_child() {
  // The parent's threads do not exist here: their handles are let go of without a join
  // (leaked: destroying a joinable std::thread terminates), the lock and condition
  // variable made anew (the old ones may name parent threads), the parent's queued work
  // dropped. Workers start again on first use.
  new std::vector<std::thread>(std::move(workers_));
  workers_.clear();
  new (&mu_) std::mutex();
  new (&jobs_mu_) std::mutex();  // the free jobs stay; those queued tasks held are let go
  new (&cv_) std::condition_variable();
  new (&queue_) std::deque<std::function<void()>>();
  queued_.store(0, std::memory_order_relaxed);
  sleepers_ = 0;
  stop_ = false;
  workers_lost_.store(true, std::memory_order_release);
}

void ThreadPool::start_workers_after_fork() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!workers_lost_.load(std::memory_order_acquire)) return;
  const int workers = num_threads_ - 1;
  workers_.reserve(workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  workers_lost_.store(false, std::memory_order_release);
}

void ThreadPool::worker_loop() {
  for (;;) {
    std::function<void()> task;
    spin_until([this] { return queued_.load(std::memory_order_acquire) > 0; }, allow_spinning_);
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (queue_.empty() && !stop_) {
        ++sleepers_;
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        --sleepers_;
      }
      if (queue_.empty()) return;  // stop_ and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    task();
  }
}

void ThreadPool::schedule(std::function<void()> task) {
  if (workers_lost_.load(std::memory_order_acquire)) start_workers_after_fork();
  if (num_threads_ == 1) {
    task();
    return;
  }
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    wake = sleepers_ > 0;
  }
  queued_.fetch_add(1, std::memory_order_release);  // after the unlock, as in parallel_for
  if (wake) cv_.notify_one();
}

// Shared state of one parallel_for. The chunks are cut into one contiguous segment per
// participant (the caller is participant 0, each helper takes the next number when it
// starts): each works through its own segment first, then claims what is left of the
// others'. Whoever arrives after the last chunk is claimed does nothing.
//
// Segments rather than one shared counter: consecutive kernels over the same activation
// give the same part of it (the top rows, the first pixels) to the same thread, which
// finds its input in its own core's cache. With one counter, which thread computed which
// part changed from kernel to kernel, and a part written by one core was read by the other.
//
// Jobs are reused: the caller and each queued helper hold a reference, and the last one to
// let go returns the job to its pool's free list (a helper that starts late, after the
// caller returned, still finds the job alive, with nothing left to claim). Each call used to
// allocate the job, its segments and each helper's task closure, and free them on another
// thread: 1.4-1.9 us an empty parallel_for at 2 threads, most of it in malloc's arena lock.
struct ThreadPool::Job {
  struct alignas(64) Segment {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunk = 1, num_chunks = 0;
  int parts = 1;
  std::unique_ptr<Segment[]> segments;
  int capacity = 0;
  std::atomic<int> refs{0};
  std::atomic<int> joined{1};  // participant numbers given out; 0 is the caller's
  std::atomic<int64_t> done{0};
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr error;

  void split(int participants) {
    parts = participants;
    if (capacity < parts) {
      segments.reset(new Segment[static_cast<size_t>(parts)]);
      capacity = parts;
    }
    for (int p = 0; p < parts; ++p) {
      segments[p].next.store(num_chunks * p / parts, std::memory_order_relaxed);
      segments[p].end = num_chunks * (p + 1) / parts;
    }
  }

  void run(int64_t c) {
    const int64_t b = c * chunk, e = std::min(n, b + chunk);
    try {
      (*fn)(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
    if (done.fetch_add(1) + 1 == num_chunks) {
      std::lock_guard<std::mutex> lock(mu);
      cv.notify_all();
    }
  }

  void drain(int seg) {
    Segment& s = segments[seg];
    for (;;) {
      if (s.next.load(std::memory_order_relaxed) >= s.end) return;
      const int64_t c = s.next.fetch_add(1);
      if (c >= s.end) return;
      run(c);
    }
  }

  // Participant p: its own segment, then the others' in turn.
  void work(int p) {
    for (int k = 0; k < parts; ++k) drain((p + k) % parts);
  }
};

ThreadPool::Job* ThreadPool::acquire_job() {
  std::lock_guard<std::mutex> lock(jobs_mu_);
  if (free_jobs_.empty()) return new Job();
  Job* j = free_jobs_.back();
  free_jobs_.pop_back();
  return j;
}

void ThreadPool::release_job(Job* job) {
  if (job->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  job->fn = nullptr;
  job->error = nullptr;
  std::lock_guard<std::mutex> lock(jobs_mu_);
  free_jobs_.push_back(job);
}

void ThreadPool::free_jobs() {
  std::lock_guard<std::mutex> lock(jobs_mu_);
  for (Job* j : free_jobs_) delete j;
  free_jobs_.clear();
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t max_chunk) {
  if (n <= 0) return;
  const int64_t threads = num_threads();
  if (threads == 1 || n == 1) {
    fn(0, n);
    return;
  }
  if (workers_lost_.load(std::memory_order_acquire)) start_workers_after_fork();
  const int64_t target_chunks = std::min<int64_t>(n, threads * 4);
  int64_t chunk = (n + target_chunks - 1) / target_chunks;
  if (max_chunk > 0) chunk = std::min(chunk, max_chunk);
  const int64_t num_chunks = (n + chunk - 1) / chunk;
  const int64_t helpers = std::min<int64_t>(threads - 1, num_chunks - 1);
  Job* job = acquire_job();
  job->fn = &fn;
  job->n = n;
  job->chunk = chunk;
  job->num_chunks = num_chunks;
  job->joined.store(1, std::memory_order_relaxed);
  job->done.store(0, std::memory_order_relaxed);
  job->split(static_cast<int>(helpers + 1));
  job->refs.store(static_cast<int>(helpers + 1), std::memory_order_release);
  int sleeping;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The closure holds a raw pointer (kept alive by the job's count): std::function stores
    // it without allocating.
    for (int64_t i = 0; i < helpers; ++i)
      queue_.push_back([this, job] {
        const int p = job->joined.fetch_add(1);
        job->work(p < job->parts ? p : 0);
        release_job(job);
      });
    sleeping = sleepers_;
  }
  // Counted once the lock is free: a spinning worker that sees the count takes the lock
  // without waiting on it (with the count raised inside, it found the lock held and slept
  // in the kernel until the unlock woke it, a few microseconds a call). The count is a hint
  // for spinners; the queue, under the lock, is what workers take from.
  queued_.fetch_add(static_cast<int>(helpers), std::memory_order_release);
  // Spinning workers pick the tasks up without a wake-up; only sleeping ones need one.
  if (sleeping > 0) {
    if (helpers == 1)
      cv_.notify_one();
    else
      cv_.notify_all();
  }
  job->work(0);
  if (!spin_until([&] { return job->done.load() == job->num_chunks; }, allow_spinning_)) {
    std::unique_lock<std::mutex> lock(job->mu);
    job->cv.wait(lock, [&] { return job->done.load() == job->num_chunks; });
  }
  // Every chunk has finished (an error is stored before its chunk counts as done): the
  // error is the caller's to take, and no helper touches it again.
  std::exception_ptr error = std::move(job->error);
  release_job(job);
  if (error) std::rethrow_exception(error);
}

}  // namespace ortlite
