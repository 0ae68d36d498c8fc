/** \file parallel_for.h
 * The persistent worker threads that every host-run device (cpu, metal-sim, interp) spreads a
 * launch's program instances or threadgroups over. One process-wide pool (size: hardware
 * threads, or METILE_NUM_THREADS) serves every launch; several launches from different threads
 * may run at once, each waiting only for its own work.
 */
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace metile::host {

/** Stack size of each worker; cpu program instances needing more than this cannot run. */
inline constexpr size_t kWorkerStackBytes = size_t{64} << 20;

/** Work over [0, total): chunks [b, e) go to `run(ctx, b, e)`, which must not throw. */
struct Job {
  void (*run)(void* ctx, uint64_t begin, uint64_t end) = nullptr;
  void* ctx = nullptr;
  uint64_t total = 0;
  uint64_t chunk = 1;
  /** Only workers 0 .. max_workers-1 join (0: all). A device whose threads keep large
   *  thread-local state (metal-sim's fiber stacks) bounds how many distinct threads touch it. */
  int max_workers = 0;
  std::atomic<uint64_t> next{0};
  int workers = 0;  // workers inside the job; guarded by the pool's mutex
};

class ThreadPool {
 public:
  /** The process-wide pool; created on first use. */
  static ThreadPool& instance();

  /** Threads that run program instances, the launching thread included (METILE_NUM_THREADS). */
  int concurrency() const { return size_; }

  /**
   * Runs `job` to completion. With `caller_helps` the calling thread takes chunks too (and
   * nothing waits for a worker to wake up); otherwise only workers run it.
   */
  void run(Job& job, bool caller_helps);

 private:
  /** `size` threads in all: size - 1 workers beside the launching thread, and at least one
   * worker for instances too big for the launching thread's stack. */
  explicit ThreadPool(int size);
  void worker_main(int id);
  Job* joinable(int id);
  static void drain(Job& job);

  std::mutex mu_;
  std::condition_variable work_cv_;  // jobs were queued
  std::condition_variable done_cv_;  // a worker left a job
  std::vector<Job*> queue_;  // capacity reserved up front: launching allocates nothing
  int size_ = 1;
  std::vector<pthread_t> workers_;
};

/**
 * Calls body(begin, end) for chunks of `chunk` indices covering [0, n) on the pool and the
 * calling thread, with at most `max_workers` pool workers (0: all); returns when all returned.
 * body must not throw.
 */
void parallel_for(uint64_t n, uint64_t chunk, int max_workers,
                  const std::function<void(uint64_t, uint64_t)>& body);

}  // namespace metile::host
