#include "runtime/metal_sim/worker_pool.h"

#include <algorithm>
#include <atomic>

namespace metile::metal_sim {

struct WorkerPool::Job {
  uint64_t n = 0;
  const std::function<void(uint64_t)>* body = nullptr;
  std::atomic<uint64_t> next{0};
  int helpers = 0;  // workers inside work_on (guarded by the pool's mutex)
  std::condition_variable done;
};

WorkerPool::WorkerPool(unsigned workers) {
  for (unsigned i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

WorkerPool& WorkerPool::shared() {
  // Each worker maps fiber stacks for a whole threadgroup (two mappings per thread with its guard
  // page); 32 workers keep that far below the kernel's default limit of 65530 mappings.
  static WorkerPool pool(std::clamp(std::thread::hardware_concurrency(), 2u, 32u) - 1);
  return pool;
}

void WorkerPool::work_on(Job& job) {
  for (uint64_t i; (i = job.next.fetch_add(1, std::memory_order_relaxed)) < job.n;) (*job.body)(i);
}

void WorkerPool::parallel_for(uint64_t n, const std::function<void(uint64_t)>& body) {
  if (n == 0) return;
  auto job = std::make_shared<Job>();
  job->n = n;
  job->body = &body;
  if (n > 1 && !threads_.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(job);
    }
    wake_.notify_all();
  }
  work_on(*job);
  std::unique_lock<std::mutex> lock(mu_);
  // Once the job is off the list no worker joins it; wait for those already in.
  jobs_.erase(std::remove(jobs_.begin(), jobs_.end(), job), jobs_.end());
  job->done.wait(lock, [&] { return job->helpers == 0; });
}

void WorkerPool::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    std::shared_ptr<Job> job = jobs_.front();
    // An exhausted job leaves the list so idle workers sleep instead of spinning on it.
    if (job->next.load(std::memory_order_relaxed) >= job->n) {
      jobs_.erase(jobs_.begin());
      continue;
    }
    ++job->helpers;
    lock.unlock();
    work_on(*job);
    lock.lock();
    if (--job->helpers == 0) job->done.notify_all();
  }
}

}  // namespace metile::metal_sim
