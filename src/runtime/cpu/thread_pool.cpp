// A small work-sharing pool. Jobs are queued; every worker (and the launching thread) claims
// chunks of the front job with one atomic add. A job leaves the queue once all its chunks are
// claimed, so a worker that wakes late finds nothing and sleeps again: the launching thread
// never waits for a wake-up, only for chunks already running. Workers are pthreads because
// program instances keep their tiles on the stack and need kWorkerStackBytes of it.
#include "runtime/cpu/thread_pool.h"

#include <pthread.h>

#include <algorithm>

#include "support/env.h"
#include "support/error.h"

namespace metile::cpu {

namespace {

int pool_size() {
  long long n = env_int("METILE_NUM_THREADS", 0);
  if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min<long long>(n, 1024));
}

}  // namespace

ThreadPool& ThreadPool::instance() {
  // Never destroyed: workers may be mid-job while static destructors run at exit.
  static ThreadPool* pool = new ThreadPool(std::max(1, pool_size() - 1));
  return *pool;
}

ThreadPool::ThreadPool(int workers) {
  queue_.reserve(64);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kWorkerStackBytes);
  for (int i = 0; i < workers; ++i) {
    pthread_t t;
    auto entry = [](void* self) -> void* {
      static_cast<ThreadPool*>(self)->worker_main();
      return nullptr;
    };
    if (pthread_create(&t, &attr, entry, this) != 0) break;
    workers_.push_back(t);
  }
  pthread_attr_destroy(&attr);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (pthread_t t : workers_) pthread_join(t, nullptr);
}

void ThreadPool::drain(Job& job) {
  for (;;) {
    uint64_t b = job.next.fetch_add(job.chunk, std::memory_order_relaxed);
    if (b >= job.total) return;
    job.run(job.ctx, b, std::min(job.total, b + job.chunk));
  }
}

void ThreadPool::worker_main() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Job* job = queue_.front();
    if (job->next.load(std::memory_order_relaxed) >= job->total) {
      queue_.erase(queue_.begin());  // fully claimed: nothing left for anyone
      continue;
    }
    ++job->workers;
    lock.unlock();
    drain(*job);
    lock.lock();
    if (!queue_.empty() && queue_.front() == job) queue_.erase(queue_.begin());
    --job->workers;
    done_cv_.notify_all();
  }
}

void ThreadPool::run(Job& job, bool caller_helps) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&job);
  }
  // Wake only as many workers as there are chunks beyond the caller's first.
  uint64_t chunks = (job.total + job.chunk - 1) / job.chunk;
  if (chunks > (caller_helps ? 1u : 0u)) {
    if (chunks - (caller_helps ? 1 : 0) >= workers_.size()) work_cv_.notify_all();
    else work_cv_.notify_one();
  }
  if (caller_helps) drain(job);
  std::unique_lock<std::mutex> lock(mu_);
  if (caller_helps) {
    auto it = std::find(queue_.begin(), queue_.end(), &job);
    if (it != queue_.end()) queue_.erase(it);
  }
  done_cv_.wait(lock, [&] {
    bool queued = std::find(queue_.begin(), queue_.end(), &job) != queue_.end();
    return !queued && job.workers == 0;
  });
}

}  // namespace metile::cpu
