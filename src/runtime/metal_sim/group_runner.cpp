#include "runtime/metal_sim/group_runner.h"

#include <algorithm>
#include <cstring>

#include "codegen/metal/msl_signature.h"
#include "support/error.h"

namespace metile::metal_sim {

namespace {

// Virtual size of each fiber's stack (at least; a kernel's measured frames may ask for more);
// pages are only committed when touched.
constexpr size_t kStackBytes = 256 * 1024;
// Room above a kernel's own frames: the trampoline, the shim's calls into the runtime, fiber
// switches.
constexpr size_t kStackMargin = 128 * 1024;
constexpr uint32_t kWidth = METAL_SIM_SIMD_WIDTH;
// Fresh threadgroup memory reads as NaN (and -1 as integers) so a kernel that reads before it
// writes shows it.
constexpr int kPoison = 0xff;
constexpr uint64_t kArenaAlign = 64;
// Which lanes take part in a collective under divergent control flow depends on where they
// reconverge, which a fiber cannot know; metal-sim reports such code rather than guess.
constexpr const char* kUniformCollectives =
    "metal-sim needs every live lane of a simdgroup at the same simd_* call";

}  // namespace

// Outside the anonymous namespace: Thread (declared in the header) has a member of this type.
enum class ThreadState : uint8_t { ready, running, barrier, simd, finished };

struct GroupRunner::Thread {
  metal_sim_thread abi{};
  GroupRunner* runner = nullptr;
  ThreadState state = ThreadState::ready;
  Site site;
  Fiber fiber;
};

struct GroupRunner::Simdgroup {
  alignas(16) unsigned char slots[2][kWidth][METAL_SIM_SLOT_BYTES];
  uint32_t first = 0;      // index of lane 0 in the group
  uint32_t live_mask = 0;  // lanes that have not finished
  uint32_t live = 0;
  uint32_t waiting = 0;  // live lanes waiting in simd_sync
};

namespace {

GroupRunner::Thread& thread_of(metal_sim_thread* t) {
  return *static_cast<GroupRunner::Thread*>(t->owner);
}

void op_barrier(metal_sim_thread* t, uint32_t line, uint32_t column) {
  GroupRunner::Thread& th = thread_of(t);
  th.runner->barrier(th, {line, column, "threadgroup_barrier"});
}

void op_simd_sync(metal_sim_thread* t, uint32_t line, uint32_t column, const char* what) {
  GroupRunner::Thread& th = thread_of(t);
  th.runner->simd_sync(th, {line, column, what});
}

void* op_threadgroup_variable(metal_sim_thread* t, uint32_t id, uint64_t size, uint64_t align,
                              const char* name) {
  GroupRunner::Thread& th = thread_of(t);
  return th.runner->threadgroup_variable(th, id, size, align, name);
}

void op_check_time(metal_sim_thread* t) {
  GroupRunner::Thread& th = thread_of(t);
  th.runner->check_stop(th);
}

const metal_sim_ops kOps = {&op_barrier, &op_simd_sync, &op_threadgroup_variable,
                            &op_check_time};

bool same_site(const GroupRunner::Site& a, const GroupRunner::Site& b) {
  return a.line == b.line && a.column == b.column &&
         (a.what == b.what || std::strcmp(a.what, b.what) == 0);
}

}  // namespace

GroupRunner::GroupRunner()
    : stacks_(kStackBytes),
      arena_storage_(new unsigned char[kThreadgroupMemoryLimit + kArenaAlign]) {
  auto p = reinterpret_cast<uintptr_t>(arena_storage_.get());
  arena_ = arena_storage_.get() + ((kArenaAlign - p % kArenaAlign) % kArenaAlign);
  fiber_adopt_thread(main_);
}

GroupRunner::~GroupRunner() = default;

GroupRunner& GroupRunner::for_this_thread() {
  thread_local std::unique_ptr<GroupRunner> runner;
  if (!runner) runner = std::make_unique<GroupRunner>();
  return *runner;
}

bool GroupRunner::run(const LaunchPlan& plan, uint64_t index, std::string* error) {
  plan_ = &plan;
  const auto& tpg = plan.threads;
  thread_count_ = tpg[0] * tpg[1] * tpg[2];
  uint32_t num_sg = (thread_count_ + kWidth - 1) / kWidth;
  const auto& grid = plan.groups;
  group_ = {static_cast<uint32_t>(index % grid[0]),
            static_cast<uint32_t>(index / grid[0] % grid[1]),
            static_cast<uint32_t>(index / (uint64_t{grid[0]} * grid[1]))};
  failed_ = false;
  error_.clear();
  at_barrier_ = finished_ = 0;

  // Threadgroup memory: the [[threadgroup(i)]] arguments first, variables as the kernel reaches
  // them.
  arena_used_ = 0;
  variables_.clear();
  args_ = plan.args;
  for (const LaunchPlan::ThreadgroupArg& a : plan.threadgroup_args)
    args_[a.index] = allocate(a.bytes, 16);

  if (threads_.size() < thread_count_) threads_.resize(thread_count_);
  if (simdgroups_.size() < num_sg) simdgroups_.resize(num_sg);
  stacks_.reserve(thread_count_, std::max<size_t>(kStackBytes, plan.stack_bytes + kStackMargin));
  queue_.assign(thread_count_, 0);
  queue_head_ = queue_size_ = 0;

  for (uint32_t s = 0; s < num_sg; ++s) {
    Simdgroup& sg = simdgroups_[s];
    sg.first = s * kWidth;
    sg.live = std::min(kWidth, thread_count_ - sg.first);
    sg.live_mask = sg.live == kWidth ? ~0u : (1u << sg.live) - 1u;
    sg.waiting = 0;
  }
  for (uint32_t i = 0; i < thread_count_; ++i) {
    Thread& th = threads_[i];
    th.runner = this;
    th.site = {};
    metal_sim_thread& t = th.abi;
    t.ops = &kOps;
    t.owner = &th;
    uint32_t local[3] = {i % tpg[0], i / tpg[0] % tpg[1], i / (tpg[0] * tpg[1])};
    auto set = [&t](int which, uint32_t x, uint32_t y, uint32_t z) {
      t.builtin[which][0] = x;
      t.builtin[which][1] = y;
      t.builtin[which][2] = z;
    };
    set(METAL_SIM_THREAD_POSITION_IN_GRID, group_[0] * tpg[0] + local[0],
        group_[1] * tpg[1] + local[1], group_[2] * tpg[2] + local[2]);
    set(METAL_SIM_THREAD_POSITION_IN_THREADGROUP, local[0], local[1], local[2]);
    set(METAL_SIM_THREAD_INDEX_IN_THREADGROUP, i, 0, 0);
    set(METAL_SIM_THREADGROUP_POSITION_IN_GRID, group_[0], group_[1], group_[2]);
    set(METAL_SIM_THREADS_PER_THREADGROUP, tpg[0], tpg[1], tpg[2]);
    set(METAL_SIM_THREADGROUPS_PER_GRID, grid[0], grid[1], grid[2]);
    set(METAL_SIM_THREADS_PER_GRID, grid[0] * tpg[0], grid[1] * tpg[1], grid[2] * tpg[2]);
    set(METAL_SIM_THREAD_INDEX_IN_SIMDGROUP, i % kWidth, 0, 0);
    set(METAL_SIM_SIMDGROUP_INDEX_IN_THREADGROUP, i / kWidth, 0, 0);
    set(METAL_SIM_THREADS_PER_SIMDGROUP, kWidth, 0, 0);
    set(METAL_SIM_SIMDGROUPS_PER_THREADGROUP, num_sg, 0, 0);
    t.simd_slots = simdgroups_[i / kWidth].slots;
    t.simd_active = simdgroups_[i / kWidth].live_mask;
    t.simd_parity = 0;
    t.loop_ticks = 0;
    fiber_init(th.fiber, stacks_.bottom(i), stacks_.stack_bytes(), &GroupRunner::thread_main, &th);
    make_ready(th);
  }

  // Threads switch straight to the next ready thread; control comes back here only when none is
  // left (or the group failed).
  if (queue_size_ > 0) fiber_switch(main_, next_fiber());
  // Nothing left to run but unfinished threads: some lanes wait in a simd collective for lanes
  // that wait at a barrier, or threads wait at a threadgroup_barrier the others never reach.
  if (!failed_ && finished_ < thread_count_) {
    failed_ = true;
    uint32_t stuck = thread_count_;
    for (uint32_t i = 0; i < thread_count_ && stuck == thread_count_; ++i)
      if (threads_[i].state == ThreadState::simd) stuck = i;
    if (stuck < thread_count_) {
      uint32_t first = stuck / kWidth * kWidth;
      error_ = cat(plan.kernel, ": a simd collective of simdgroup ", stuck / kWidth,
                   " is not reached by every live lane (",
                   describe(first, std::min(kWidth, thread_count_ - first), "thread"), ") in ",
                   where(), "; ", kUniformCollectives);
    } else {
      error_ = cat(plan.kernel, ": threadgroup_barrier not reached by every thread (",
                   describe(0, thread_count_, "thread"), ") in ", where());
    }
  }
  if (failed_) *error = std::move(error_);
  return !failed_;
}

void GroupRunner::thread_main(void* p) {
  Thread& th = *static_cast<Thread*>(p);
  GroupRunner& r = *th.runner;
  fiber_started();
  r.plan_->entry(&th.abi, r.args_.data());
  r.finish(th);
}

void GroupRunner::finish(Thread& th) {
  th.state = ThreadState::finished;
  ++finished_;
  uint32_t i = static_cast<uint32_t>(&th - threads_.data());
  Simdgroup& sg = simdgroups_[i / kWidth];
  sg.live_mask &= ~(1u << (i % kWidth));
  --sg.live;
  // The lanes still waiting in a collective may have been waiting only for this one.
  if (sg.live > 0 && sg.waiting == sg.live) release_simd(sg, nullptr);
  fiber_exit(th.fiber, failed_ ? main_ : next_fiber());
}

void GroupRunner::abandon(Thread& th) { fiber_exit(th.fiber, main_); }

std::string LaunchPlan::stop_message(const std::string& where) const {
  return cat(stop->reason(kernel), "; stopped in ", where, "; its outputs are partly written");
}

void GroupRunner::check_stop(Thread& th) {
  if (!plan_->should_stop()) return;
  failed_ = true;
  error_ = plan_->stop_message(where());
  abandon(th);
}

Fiber& GroupRunner::next_fiber() {
  if (queue_size_ == 0) return main_;
  Thread& th = threads_[queue_[queue_head_]];
  queue_head_ = (queue_head_ + 1) % thread_count_;
  --queue_size_;
  th.state = ThreadState::running;
  return th.fiber;
}

void GroupRunner::make_ready(Thread& th) {
  th.state = ThreadState::ready;
  queue_[(queue_head_ + queue_size_) % thread_count_] =
      static_cast<uint32_t>(&th - threads_.data());
  ++queue_size_;
}

void GroupRunner::barrier(Thread& th, Site site) {
  check_stop(th);
  th.state = ThreadState::barrier;
  th.site = site;
  if (++at_barrier_ == thread_count_) {
    bool same = true;
    for (uint32_t i = 0; i < thread_count_ && same; ++i) same = same_site(threads_[i].site, site);
    if (same) {
      at_barrier_ = 0;
      for (uint32_t i = 0; i < thread_count_; ++i)
        if (&threads_[i] != &th) make_ready(threads_[i]);
      th.state = ThreadState::running;
      return;
    }
    // Every thread waits, at different barriers: the scheduler finds nothing to run and reports.
  }
  fiber_switch(th.fiber, next_fiber());
}

void GroupRunner::simd_sync(Thread& th, Site site) {
  uint32_t i = static_cast<uint32_t>(&th - threads_.data());
  Simdgroup& sg = simdgroups_[i / kWidth];
  check_stop(th);
  th.state = ThreadState::simd;
  th.site = site;
  if (++sg.waiting == sg.live) {
    if (!release_simd(sg, &th)) abandon(th);
    th.state = ThreadState::running;
    return;
  }
  fiber_switch(th.fiber, next_fiber());
}

bool GroupRunner::release_simd(Simdgroup& sg, Thread* self) {
  const Site* site = nullptr;
  for (uint32_t lane = 0; lane < kWidth; ++lane) {
    if (!((sg.live_mask >> lane) & 1u)) continue;
    const Site& s = threads_[sg.first + lane].site;
    if (site == nullptr) site = &s;
    if (!same_site(s, *site)) {
      failed_ = true;
      uint32_t lanes = std::min(kWidth, thread_count_ - sg.first);
      error_ = cat(plan_->kernel, ": the lanes of simdgroup ", sg.first / kWidth,
                   " called different simd functions (", describe(sg.first, lanes, "thread"),
                   ") in ", where(), "; ", kUniformCollectives);
      return false;
    }
  }
  sg.waiting = 0;
  for (uint32_t lane = 0; lane < kWidth; ++lane) {
    if (!((sg.live_mask >> lane) & 1u)) continue;
    Thread& t = threads_[sg.first + lane];
    t.abi.simd_active = sg.live_mask;
    if (&t != self) make_ready(t);
  }
  return true;
}

void* GroupRunner::threadgroup_variable(Thread& th, uint32_t id, uint64_t size, uint64_t align,
                                        const char* name) {
  if (id < variables_.size() && variables_[id] >= 0) return arena_ + variables_[id];
  if (id >= variables_.size()) variables_.resize(id + 1, -1);
  uint64_t start = aligned_start(align);
  if (align > kArenaAlign || start + size > kThreadgroupMemoryLimit) {
    failed_ = true;
    error_ = align > kArenaAlign
                 ? cat(plan_->kernel, ": threadgroup variable '", name, "' needs ", align,
                       "-byte alignment; metal-sim aligns threadgroup memory to ", kArenaAlign)
                 : cat(plan_->kernel, ": threadgroup memory exceeds Apple's ",
                       kThreadgroupMemoryLimit, "-byte limit: threadgroup variable '", name,
                       "' needs ", size, " bytes and ", start, " are in use");
    abandon(th);
  }
  variables_[id] = static_cast<int64_t>(start);
  return allocate(size, align);
}

uint64_t GroupRunner::aligned_start(uint64_t align) const {
  uint64_t a = std::max<uint64_t>(align, 16);
  return (arena_used_ + a - 1) / a * a;
}

void* GroupRunner::allocate(uint64_t size, uint64_t align) {
  uint64_t start = aligned_start(align);
  arena_used_ = start + size;
  std::memset(arena_ + start, kPoison, size);
  return arena_ + start;
}

std::string GroupRunner::where() const {
  return cat("threadgroup (", group_[0], ",", group_[1], ",", group_[2], ")");
}

std::string GroupRunner::describe(uint32_t first, uint32_t count, const char* noun) const {
  auto state_of = [&](uint32_t i) {
    const Thread& t = threads_[i];
    switch (t.state) {
      case ThreadState::finished:
        return std::string("finished");
      case ThreadState::barrier:
      case ThreadState::simd:
        return cat("waiting at ", t.site.what, " (line ", t.site.line, ")");
      case ThreadState::ready:
      case ThreadState::running:
        break;
    }
    return std::string("running");
  };
  std::string out;
  for (uint32_t i = first; i < first + count;) {
    std::string s = state_of(i);
    uint32_t j = i + 1;
    while (j < first + count && state_of(j) == s) ++j;
    out += cat(out.empty() ? "" : "; ", noun, j - i > 1 ? "s " : " ", i);
    if (j - i > 1) out += cat("..", j - 1);
    out += " " + s;
    i = j;
  }
  return out;
}

}  // namespace metile::metal_sim
