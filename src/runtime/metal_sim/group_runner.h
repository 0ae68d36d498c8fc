/** \file group_runner.h
 * Runs one threadgroup of a metal-sim launch on the calling OS thread: each of its T threads is
 * a fiber that runs until it finishes or waits (threadgroup_barrier, a simd collective); a
 * barrier releases when every thread of the group waits at that same barrier, a collective when
 * every live lane of the simdgroup waits at that same call. When no thread can run and some have
 * not finished, the group reports which threads wait where instead of hanging.
 */
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/prelude/metal_sim_abi.h"
#include "runtime/host/cancel.h"
#include "runtime/metal_sim/fiber.h"

namespace metile::metal_sim {

/** What every threadgroup of one launch shares. */
struct LaunchPlan {
  std::string kernel;  // for messages
  metal_sim_entry_fn entry = nullptr;
  std::array<uint32_t, 3> groups{1, 1, 1};
  std::array<uint32_t, 3> threads{1, 1, 1};
  uint64_t stack_bytes = 0;  // MslSignature::stack_bytes
  /** One per signature argument; the runner fills the threadgroup arguments' slots. */
  std::vector<void*> args;
  struct ThreadgroupArg {
    size_t index;
    uint64_t bytes;
  };
  std::vector<ThreadgroupArg> threadgroup_args;
  /** What stops the launch from the host (its time limit, METILE_TIMEOUT_S or its own, and
   * metile_cancel_launches): threads check it whenever they wait (barriers, simd collectives)
   * and every 4096 loop turns, the launch before each threadgroup; then the launch stops with an
   * error. Empty for a launch only its kernel's stop word may stop, as on a GPU (the metal
   * stand-in's). */
  std::optional<host::LaunchStop> stop;
  bool should_stop() const { return stop && stop->should_stop(); }
  /** The error for a launch stopped by should_stop(), at `where`. */
  std::string stop_message(const std::string& where) const;
};

class GroupRunner {
 public:
  GroupRunner();
  ~GroupRunner();
  GroupRunner(const GroupRunner&) = delete;
  GroupRunner& operator=(const GroupRunner&) = delete;

  /** Runs threadgroup `index` (x varies fastest); false, with `error` set, when it failed. */
  bool run(const LaunchPlan& plan, uint64_t index, std::string* error);

  /** The calling OS thread's runner (its stacks and threadgroup memory are reused). */
  static GroupRunner& for_this_thread();

  struct Thread;
  struct Simdgroup;
  struct Site {
    uint32_t line = 0, column = 0;
    const char* what = "";
  };

  // The services behind metal_sim_ops; they run on the calling thread's fiber.
  void barrier(Thread& th, Site site);
  void simd_sync(Thread& th, Site site);
  void* threadgroup_variable(Thread& th, uint32_t id, uint64_t size, uint64_t align,
                             const char* name);
  /** Ends the group (the thread does not return) when the launch is past its time limit. */
  void check_stop(Thread& th);

 private:
  static void thread_main(void* thread);
  [[noreturn]] void finish(Thread& th);
  [[noreturn]] void abandon(Thread& th);
  /** Takes the next ready thread off the queue (the scheduler's context when there is none). */
  Fiber& next_fiber();
  bool release_simd(Simdgroup& sg, Thread* self);
  void make_ready(Thread& th);
  std::string where() const;
  std::string describe(uint32_t first, uint32_t count, const char* noun) const;
  uint64_t aligned_start(uint64_t align) const;
  void* allocate(uint64_t size, uint64_t align);

  const LaunchPlan* plan_ = nullptr;
  std::array<uint32_t, 3> group_{0, 0, 0};
  uint32_t thread_count_ = 0;
  std::vector<Thread> threads_;
  std::vector<Simdgroup> simdgroups_;
  StackPool stacks_;
  Fiber main_;
  std::vector<uint32_t> queue_;  // ring of ready threads
  size_t queue_head_ = 0, queue_size_ = 0;
  uint32_t at_barrier_ = 0, finished_ = 0;
  std::vector<void*> args_;
  std::unique_ptr<unsigned char[]> arena_storage_;
  unsigned char* arena_ = nullptr;  // threadgroup memory
  uint64_t arena_used_ = 0;
  std::vector<int64_t> variables_;  // threadgroup variable id -> arena offset (-1: not yet)
  bool failed_ = false;
  std::string error_;
};

}  // namespace metile::metal_sim
