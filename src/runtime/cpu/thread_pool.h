/** \file thread_pool.h
 * The persistent worker threads that cpu launches spread program instances over. One process-
 * wide pool (size: hardware threads, or METILE_NUM_THREADS) serves every launch; several
 * launches from different threads may run at once, each waiting only for its own work.
 */
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace metile::cpu {

/** Stack size of each worker; program instances needing more than this cannot run. */
inline constexpr size_t kWorkerStackBytes = size_t{64} << 20;

/** Work over [0, total): chunks [b, e) go to `run(ctx, b, e)`. */
struct Job {
  void (*run)(void* ctx, uint64_t begin, uint64_t end) = nullptr;
  void* ctx = nullptr;
  uint64_t total = 0;
  uint64_t chunk = 1;
  std::atomic<uint64_t> next{0};
  int workers = 0;  // workers inside the job; guarded by the pool's mutex
};

class ThreadPool {
 public:
  /** The process-wide pool; created on first use. */
  static ThreadPool& instance();
  ~ThreadPool();

  /** Threads that run program instances, the launching thread included. */
  int concurrency() const { return static_cast<int>(workers_.size()) + 1; }

  /**
   * Runs `job` to completion. With `caller_helps` the calling thread takes chunks too (and
   * nothing waits for a worker to wake up); otherwise only workers run it.
   */
  void run(Job& job, bool caller_helps);

 private:
  explicit ThreadPool(int workers);
  void worker_main();
  static void drain(Job& job);

  std::mutex mu_;
  std::condition_variable work_cv_;  // jobs were queued, or stopping
  std::condition_variable done_cv_;  // a worker left a job
  std::vector<Job*> queue_;  // capacity reserved up front: launching allocates nothing
  bool stop_ = false;
  std::vector<pthread_t> workers_;
};

}  // namespace metile::cpu
