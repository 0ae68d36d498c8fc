/** \file worker_pool.h
 * The OS threads that run metal-sim threadgroups. A launch hands out group indices through an
 * atomic counter; the launching thread works too, so launches from several host threads at once
 * always make progress.
 */
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace metile::metal_sim {

class WorkerPool {
 public:
  explicit WorkerPool(unsigned workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  /** The process-wide pool (started on first use). */
  static WorkerPool& shared();

  /** Calls body(i) for every i in [0, n), spread over the workers and the caller; returns when
   *  all calls returned. body must not throw. */
  void parallel_for(uint64_t n, const std::function<void(uint64_t)>& body);

  unsigned workers() const { return static_cast<unsigned>(threads_.size()); }

 private:
  struct Job;
  void worker_loop();
  static void work_on(Job& job);

  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Job>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace metile::metal_sim
