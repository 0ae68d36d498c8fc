#include "runtime/metal_sim/fiber.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "support/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define METILE_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define METILE_FIBER_ASAN 1
#endif
#endif

#ifdef METILE_FIBER_ASAN
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                     size_t* size_old);
void __asan_unpoison_memory_region(const volatile void* addr, size_t size);
}
#endif

// metile_fiber_swap(void** save_sp, void* new_sp): pushes the callee-saved registers, stores the
// stack pointer in *save_sp, loads new_sp and pops the registers saved there. A new fiber's stack
// is laid out as if it had called metile_fiber_swap, "returning" into metile_fiber_start, which
// calls fn(arg) from the registers fiber_init seeded.
#if defined(__APPLE__)
#define METILE_ASM_FUNC(name) ".globl _" #name "\n.private_extern _" #name "\n_" #name ":\n"
#define METILE_ASM_END(name)
#else
#define METILE_ASM_FUNC(name) \
  ".globl " #name "\n.hidden " #name "\n.type " #name ",%function\n" #name ":\n"
#define METILE_ASM_END(name) ".size " #name ", .-" #name "\n"
#endif

#if defined(__x86_64__) || defined(__aarch64__)
#define METILE_FIBER_ASM 1
extern "C" void metile_fiber_swap(void** save_sp, void* new_sp);
extern "C" void metile_fiber_start();
#endif

#if defined(__x86_64__)
// System V: rbx, rbp, r12-r15 are callee-saved; a fiber starts with r12 = arg, r13 = fn.
asm(".text\n.p2align 4\n" METILE_ASM_FUNC(metile_fiber_swap)
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n" METILE_ASM_END(metile_fiber_swap)
    ".p2align 4\n" METILE_ASM_FUNC(metile_fiber_start)
    "  movq %r12, %rdi\n  callq *%r13\n  ud2\n" METILE_ASM_END(metile_fiber_start));
#elif defined(__aarch64__)
// AAPCS64: x19-x29, x30 (lr) and d8-d15 are callee-saved; a fiber starts with x19 = arg,
// x20 = fn, x30 = metile_fiber_start.
asm(".text\n.p2align 4\n" METILE_ASM_FUNC(metile_fiber_swap)
    "  sub sp, sp, #160\n"
    "  stp x19, x20, [sp, #0]\n  stp x21, x22, [sp, #16]\n  stp x23, x24, [sp, #32]\n"
    "  stp x25, x26, [sp, #48]\n  stp x27, x28, [sp, #64]\n  stp x29, x30, [sp, #80]\n"
    "  stp d8, d9, [sp, #96]\n  stp d10, d11, [sp, #112]\n  stp d12, d13, [sp, #128]\n"
    "  stp d14, d15, [sp, #144]\n"
    "  mov x9, sp\n  str x9, [x0]\n  mov sp, x1\n"
    "  ldp x19, x20, [sp, #0]\n  ldp x21, x22, [sp, #16]\n  ldp x23, x24, [sp, #32]\n"
    "  ldp x25, x26, [sp, #48]\n  ldp x27, x28, [sp, #64]\n  ldp x29, x30, [sp, #80]\n"
    "  ldp d8, d9, [sp, #96]\n  ldp d10, d11, [sp, #112]\n  ldp d12, d13, [sp, #128]\n"
    "  ldp d14, d15, [sp, #144]\n"
    "  add sp, sp, #160\n  ret\n" METILE_ASM_END(metile_fiber_swap)
    ".p2align 4\n" METILE_ASM_FUNC(metile_fiber_start)
    "  mov x0, x19\n  blr x20\n  brk #0\n" METILE_ASM_END(metile_fiber_start));
#endif

namespace metile::metal_sim {

bool fibers_supported() {
#ifdef METILE_FIBER_ASM
  return true;
#else
  return false;
#endif
}

namespace {

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

StackPool::StackPool(size_t stack_bytes) {
  size_t page = page_size();
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
}

StackPool::~StackPool() {
  if (base_ != nullptr) munmap(base_, mapped_);
}

void StackPool::reserve(size_t n, size_t stack_bytes) {
  size_t page = page_size();
  stack_bytes = (stack_bytes + page - 1) / page * page;
  if (n <= count_ && stack_bytes <= stack_bytes_) return;
  // A kernel with bigger frames gets bigger stacks for every slot; the old mapping (and the
  // memory a previous kernel touched in it) goes.
  if (stack_bytes > stack_bytes_) count_ = 0;
  stack_bytes_ = std::max(stack_bytes_, stack_bytes);
  n = std::max(n, count_);
  // Stacks are only reserved between threadgroups, when no fiber is live, so the old mapping can
  // go; each slot is a guard page followed by the stack (stacks grow down into the guard).
  size_t slot = page + stack_bytes_;
  size_t bytes = slot * n;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    fail(METILE_ERROR_OUT_OF_MEMORY, "metal-sim", "cannot map ", n, " fiber stacks of ",
         stack_bytes_, " bytes: ", std::strerror(errno));
  auto* base = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    if (mprotect(base + i * slot, page, PROT_NONE) != 0) {
      int err = errno;
      munmap(p, bytes);
      fail(METILE_ERROR_OUT_OF_MEMORY, "metal-sim",
           "cannot protect fiber stack guard pages: ", std::strerror(err));
    }
  }
  if (base_ != nullptr) munmap(base_, mapped_);
  base_ = base;
  mapped_ = bytes;
  count_ = n;
}

void* StackPool::bottom(size_t i) const {
  return base_ + i * (page_size() + stack_bytes_) + page_size();
}

void fiber_init(Fiber& f, void* bottom, size_t size, void (*entry)(void*), void* arg) {
#ifdef METILE_FIBER_ASAN
  // A group that failed abandons its fibers mid-call; their redzones must not outlive them.
  __asan_unpoison_memory_region(bottom, size);
#endif
  f.stack_bottom = bottom;
  f.stack_size = size;
  f.fake_stack = nullptr;
  auto top = (reinterpret_cast<uintptr_t>(bottom) + size) & ~uintptr_t{15};
#if defined(__x86_64__)
  // Popped by metile_fiber_swap: r15 r14 r13 r12 rbx rbp, then the return address. After the
  // `ret`, rsp is 16-byte aligned, so the `call` in metile_fiber_start enters fn as the ABI wants.
  auto* slots = reinterpret_cast<void**>(top - 72);
  slots[0] = nullptr;                                       // r15
  slots[1] = nullptr;                                       // r14
  slots[2] = reinterpret_cast<void*>(entry);                // r13
  slots[3] = arg;                                           // r12
  slots[4] = nullptr;                                       // rbx
  slots[5] = nullptr;                                       // rbp: ends frame-pointer chains
  slots[6] = reinterpret_cast<void*>(&metile_fiber_start);  // return address
  slots[7] = nullptr;
  slots[8] = nullptr;
  f.sp = slots;
#elif defined(__aarch64__)
  auto* slots = reinterpret_cast<void**>(top - 160);
  std::memset(slots, 0, 160);
  slots[0] = arg;                                            // x19
  slots[1] = reinterpret_cast<void*>(entry);                 // x20
  slots[11] = reinterpret_cast<void*>(&metile_fiber_start);  // x30
  f.sp = slots;
#else
  (void)top;
  (void)entry;
  (void)arg;
  fail(METILE_ERROR_DEVICE_UNAVAILABLE, "metal-sim", "fibers are not implemented for this CPU");
#endif
}

void fiber_adopt_thread(Fiber& f) {
  f = Fiber{};
#ifdef METILE_FIBER_ASAN
  // ASan must be told the bounds of the stack each switch lands on.
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &f.stack_bottom, &f.stack_size);
    pthread_attr_destroy(&attr);
  }
#endif
}

void fiber_started() {
#ifdef METILE_FIBER_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}

#ifdef METILE_FIBER_ASM
void fiber_switch(Fiber& from, Fiber& to) {
#ifdef METILE_FIBER_ASAN
  __sanitizer_start_switch_fiber(&from.fake_stack, to.stack_bottom, to.stack_size);
  metile_fiber_swap(&from.sp, to.sp);
  __sanitizer_finish_switch_fiber(from.fake_stack, nullptr, nullptr);
#else
  metile_fiber_swap(&from.sp, to.sp);
#endif
}

void fiber_exit(Fiber& from, Fiber& to) {
#ifdef METILE_FIBER_ASAN
  // A null save slot tells ASan that this fiber's fake stack can be freed.
  __sanitizer_start_switch_fiber(nullptr, to.stack_bottom, to.stack_size);
#endif
  metile_fiber_swap(&from.sp, to.sp);
  __builtin_unreachable();
}
#else
// No context switch for this CPU: the device's probe reports it unavailable, so these never run.
void fiber_switch(Fiber&, Fiber&) {
  fail(METILE_ERROR_DEVICE_UNAVAILABLE, "metal-sim", "fibers are not implemented for this CPU");
}
void fiber_exit(Fiber&, Fiber&) {
  fail(METILE_ERROR_DEVICE_UNAVAILABLE, "metal-sim", "fibers are not implemented for this CPU");
}
#endif

}  // namespace metile::metal_sim
