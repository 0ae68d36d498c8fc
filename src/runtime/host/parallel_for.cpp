// A small work-sharing pool. Jobs are queued; every worker (and the launching thread) claims
// chunks of the first job it may join with one atomic add. A job leaves the queue once all its chunks are
// claimed, so a worker that wakes late finds nothing and sleeps again: the launching thread
// never waits for a wake-up, only for chunks already running. Workers are pthreads because
// cpu program instances keep their tiles on the stack and need kWorkerStackBytes of it.
#include "runtime/host/parallel_for.h"

#include <pthread.h>

#include <algorithm>

#include "support/env.h"
#include "support/error.h"

namespace metile::host {

namespace {

int pool_size() {
  long long n = env_int("METILE_NUM_THREADS", 0);
  if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min<long long>(n, 1024));
}

}  // namespace

ThreadPool& ThreadPool::instance() {
  // Never destroyed: workers may be mid-job while static destructors run at exit.
  static ThreadPool* pool = new ThreadPool(pool_size());
  return *pool;
}

ThreadPool::ThreadPool(int size) : size_(size) {
  queue_.reserve(64);
  int workers = std::max(1, size - 1);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kWorkerStackBytes);
  for (int i = 0; i < workers; ++i) {
    pthread_t t;
    struct Start {
      ThreadPool* pool;
      int id;
    };
    auto entry = [](void* arg) -> void* {
      Start start = *static_cast<Start*>(arg);
      delete static_cast<Start*>(arg);
      start.pool->worker_main(start.id);
      return nullptr;
    };
    auto* start = new Start{this, i};
    if (pthread_create(&t, &attr, entry, start) != 0) {
      delete start;
      break;
    }
    workers_.push_back(t);
  }
  pthread_attr_destroy(&attr);
}

void ThreadPool::drain(Job& job) {
  for (;;) {
    uint64_t b = job.next.fetch_add(job.chunk, std::memory_order_relaxed);
    if (b >= job.total) return;
    job.run(job.ctx, b, std::min(job.total, b + job.chunk));
  }
}

// The first queued job this worker may join; fully claimed jobs leave the queue on the way.
Job* ThreadPool::joinable(int id) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    Job* job = *it;
    if (job->next.load(std::memory_order_relaxed) >= job->total) {
      it = queue_.erase(it);  // fully claimed: nothing left for anyone
      done_cv_.notify_all();
    } else if (job->max_workers == 0 || id < job->max_workers) {
      return job;
    } else {
      ++it;
    }
  }
  return nullptr;
}

void ThreadPool::worker_main(int id) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Job* job = nullptr;
    work_cv_.wait(lock, [&] { return (job = joinable(id)) != nullptr; });
    ++job->workers;
    lock.unlock();
    drain(*job);
    lock.lock();
    auto it = std::find(queue_.begin(), queue_.end(), job);
    if (it != queue_.end()) queue_.erase(it);
    --job->workers;
    done_cv_.notify_all();
  }
}

void ThreadPool::run(Job& job, bool caller_helps) {
  if (workers_.empty() && !caller_helps)
    fail(METILE_ERROR_DEVICE, "cpu", "no worker thread could be started to run a kernel whose ",
         "tiles do not fit on the launching thread's stack");
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&job);
  }
  // Wake only as many workers as there are chunks beyond the caller's first.
  uint64_t chunks = (job.total + job.chunk - 1) / job.chunk;
  if (chunks > (caller_helps ? 1u : 0u)) {
    // A woken worker outside max_workers would go back to sleep: wake them all then.
    if (chunks - (caller_helps ? 1 : 0) >= workers_.size() || job.max_workers > 0)
      work_cv_.notify_all();
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

void parallel_for(uint64_t n, uint64_t chunk, int max_workers,
                  const std::function<void(uint64_t, uint64_t)>& body) {
  if (n == 0) return;
  Job job;
  job.run = [](void* ctx, uint64_t b, uint64_t e) {
    (*static_cast<const std::function<void(uint64_t, uint64_t)>*>(ctx))(b, e);
  };
  job.ctx = const_cast<std::function<void(uint64_t, uint64_t)>*>(&body);
  job.total = n;
  job.chunk = std::max<uint64_t>(1, chunk);
  job.max_workers = max_workers;
  ThreadPool::instance().run(job, true);
}

}  // namespace metile::host
