/** \file fiber.h
 * Minimal cooperative fibers for metal-sim: a hand-written context switch (callee-saved registers
 * and the stack pointer; x86-64 and arm64) on stacks carved from one mapping with guard pages.
 * A switch costs a few nanoseconds, against a system call for swapcontext(), which restores the
 * signal mask. Under AddressSanitizer every switch is announced with
 * __sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber.
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace metile::metal_sim {

/** One execution context: a fiber, or the OS thread's own stack (the scheduler). */
struct Fiber {
  void* sp = nullptr;            // saved stack pointer while switched out
  void* stack_bottom = nullptr;  // lowest usable address (for ASan)
  size_t stack_size = 0;
  void* fake_stack = nullptr;  // ASan's fake stack of this context while switched out
};

/** True when this build can run fibers (the context switch exists for this architecture). */
bool fibers_supported();

/** Fixed-size stacks in one reservation, each below a PROT_NONE guard page; grows on demand. */
class StackPool {
 public:
  explicit StackPool(size_t stack_bytes);
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  /** Makes at least `n` stacks of at least `stack_bytes` available (no fiber may be live);
   * throws METILE_ERROR_OUT_OF_MEMORY when it cannot. */
  void reserve(size_t n, size_t stack_bytes);
  void* bottom(size_t i) const;
  size_t stack_bytes() const { return stack_bytes_; }

 private:
  size_t stack_bytes_;
  unsigned char* base_ = nullptr;
  size_t count_ = 0;
  size_t mapped_ = 0;
};

/**
 * Prepares `f` on the stack [bottom, bottom + size) so that the first switch to it calls
 * entry(arg). `entry` must never return: it ends with fiber_exit.
 */
void fiber_init(Fiber& f, void* bottom, size_t size, void (*entry)(void*), void* arg);

/** Saves the current context into `from` and continues `to` (a fiber or an adopted thread);
 *  returns when something switches back to `from`. */
void fiber_switch(Fiber& from, Fiber& to);

/** Makes `f` the context of the calling OS thread's own stack, so fibers can switch to it. */
void fiber_adopt_thread(Fiber& f);

/** The first call on a new fiber, completing the switch that started it. */
void fiber_started();

/** Leaves `from` for good and continues `to`. */
[[noreturn]] void fiber_exit(Fiber& from, Fiber& to);

}  // namespace metile::metal_sim
