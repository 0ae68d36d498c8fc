// A stand-in for the CUDA driver library (libcuda.so) that the cuda device opens when
// METILE_CUDA_DRIVER names it: GPUs in host memory (two, or $METILE_STANDIN_CUDA_DEVICES from 1
// to 16), streams, events and modules as host objects. A stream belongs to the context current
// when it was made; a launch or record on it under another context fails, as on a real driver.
// Kernels do not run: a launch completes at once, except a kernel whose name contains "hang",
// which never completes (its stream and the events recorded after it stay not ready) until the
// primary context is reset or, as a GPU kernel spinning in a loop does, until the host sets the
// copy of its stop word in GPU memory (the launch's last parameter, found before the null entry
// metile puts after it; the host word in mapped memory comes just before): then it answers 2 in
// the host word and ends, as a kernel whose threads leave at a check does (the stream and the
// events recorded after it become ready; the context stays usable). A "hang_nopoll" kernel
// never reads its word. A "hang_drain" kernel answers 2 at once but ends only 1.5 s later, as a
// huge grid does whose programs still to run each start, read the word and leave. A hang kernel whose copy is set when it starts ends at once, so a copy
// left set by an earlier stop shows. Copies to GPU memory (cuMemcpyHtoDAsync) happen at once,
// unless a hung kernel is ahead of them in stream order: those never happen, as on a GPU.
// That is enough to test device selection, streams, events, cancellation and the watchdog on
// machines without a GPU. Test-only: never installed.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <set>
#include <map>
#include <string>
#include <thread>

namespace {

constexpr int kSuccess = 0, kInvalidValue = 1, kInvalidDevice = 101, kInvalidHandle = 400,
              kNotReady = 600, kAlreadyRegistered = 712, kLaunchFailed = 719;
// Mapped host memory's device addresses are its host addresses plus this, so a runtime that
// passed the host address would be caught.
constexpr unsigned long long kMapOffset = 1ull << 46;
constexpr int kMaxDevices = 16;

int device_count() {
  static const int n = [] {
    const char* v = std::getenv("METILE_STANDIN_CUDA_DEVICES");
    int parsed = v ? std::atoi(v) : 2;
    return parsed >= 1 && parsed <= kMaxDevices ? parsed : 2;
  }();
  return n;
}

struct Stream {
  void* ctx = nullptr;  // the context current when it was made
  bool blocking = true;  // made without CU_STREAM_NON_BLOCKING: ordered with the legacy stream
  bool hung = false;
  std::atomic<uint32_t>* word = nullptr;  // the hung kernel's stop word (null: it never reads one)
  std::atomic<uint32_t>* copy = nullptr;  // the word's copy in GPU memory, which it reads
  uint64_t hangs = 0;    // hung kernels launched on it
  uint64_t stopped = 0;  // of those, the ones that ended (all but the running one)
  bool drains = false;   // a "hang_drain" kernel: ends kDrain after it answered
  std::chrono::steady_clock::time_point answered_at{};
};
struct Event {
  bool recorded = false;
  Stream* after = nullptr;  // recorded behind a hung kernel of this stream: ready when it stops
  uint64_t hang = 0;        // that kernel's number (Stream::hangs when recorded)
  bool hung() const { return after != nullptr && after->stopped < hang; }
};
struct Module {};
struct Function {
  std::string name;
};

std::mutex mu;
std::set<void*> live;  // streams, events, modules and functions not yet destroyed
int contexts[kMaxDevices];
thread_local void* current_ctx = nullptr;  // cuCtxSetCurrent's, per thread as in the driver
Stream legacy;  // the NULL stream
std::set<Stream*> hung;  // streams running a hung kernel
std::map<void*, size_t> registered;  // cuMemHostRegister'd host ranges
std::map<unsigned long long, size_t> device_memory;  // cuMemAlloc'd ranges
struct Allocation {
  size_t bytes;
  int ordinal;  // the GPU whose context was current when it was made
};
std::map<unsigned long long, Allocation> allocations;  // cuMemAlloc'd and cuMemAllocManaged ranges

/** Remembers an allocation for cuMemGetAddressRange and cuPointerGetAttribute (mu held). */
void remember(unsigned long long p, size_t n) {
  int ordinal = current_ctx == nullptr ? 0 : static_cast<int>(static_cast<int*>(current_ctx) - contexts);
  allocations[p] = {n, ordinal};
}

/** The allocation holding `p`, or allocations.end() (mu held). */
std::map<unsigned long long, Allocation>::iterator allocation_of(unsigned long long p) {
  auto in = allocations.upper_bound(p);
  if (in == allocations.begin()) return allocations.end();
  --in;
  return p < in->first + in->second.bytes ? in : allocations.end();
}

/** A hung kernel ends: its stream and the events behind it become ready (mu held). */
void end_hang(Stream* s) {
  s->hung = false;
  s->stopped = s->hangs;
}

/** Hung kernels whose stop word's copy is set stop: they answer 2 and end (mu held). */
void poll() {
  for (auto it = hung.begin(); it != hung.end();) {
    Stream* s = *it;
    if (s->copy == nullptr || s->copy->load() == 0) {
      ++it;
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (s->drains && s->word->load() != 2) s->answered_at = now;
    s->word->store(2);
    if (s->drains && now - s->answered_at < std::chrono::milliseconds(1500)) {
      ++it;
      continue;
    }
    end_hang(s);
    it = hung.erase(it);
  }
}

/** NULL, CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2): the current context's own stream. */
bool is_default(void* s) { return reinterpret_cast<uintptr_t>(s) <= 2; }
Stream* stream_of(void* s) { return is_default(s) ? &legacy : static_cast<Stream*>(s); }
bool known(void* p) { return is_default(p) || live.count(p) != 0; }
/** The stream belongs to the calling thread's current context (the default streams always do). */
bool current(void* s) { return is_default(s) || static_cast<Stream*>(s)->ctx == current_ctx; }

/** Work queued on `s` now would wait for a hung kernel: one on `s`, or for the legacy stream's
 * ordering with blocking streams, one on the other side of it (mu held). */
bool behind_hang(void* s) {
  Stream* st = stream_of(s);
  if (st->hung) return true;
  if (!st->blocking) return false;
  if (legacy.hung) return true;
  if (!is_default(s)) return false;
  for (Stream* h : hung)
    if (h->blocking) return true;
  return false;
}

/** The word at a launch parameter's address in one of `ranges` (host address = key + shift). */
template <typename Ranges>
std::atomic<uint32_t>* word_in(const Ranges& ranges, unsigned long long address, unsigned long long shift) {
  for (const auto& [start, bytes] : ranges) {
    unsigned long long base = reinterpret_cast<unsigned long long>(start) + shift;
    if (address >= base && address + 4 <= base + bytes)
      return reinterpret_cast<std::atomic<uint32_t>*>(address - shift);
  }
  return nullptr;
}

}  // namespace

struct MemLocation {
  int type, id;
};

extern "C" {

int cuInit(unsigned) { return kSuccess; }
int cuDriverGetVersion(int* v) { *v = 12040; return kSuccess; }
int cuDeviceGetCount(int* n) { *n = device_count(); return kSuccess; }
int cuDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return kInvalidDevice;
  *d = ordinal;
  return kSuccess;
}
int cuDeviceGetName(char* name, int len, int d) {
  std::snprintf(name, static_cast<size_t>(len), "stand-in GPU %d", d);
  return kSuccess;
}
int cuDeviceGetAttribute(int* v, int attr, int) {
  switch (attr) {
    case 1: *v = 1024; break;     // max threads per block
    case 75: *v = 9; break;       // compute capability
    case 76: *v = 0; break;
    case 97: *v = 232448; break;  // opt-in shared memory per block
    default: *v = 0;
  }
  return kSuccess;
}
int cuDevicePrimaryCtxRetain(void** ctx, int d) {
  *ctx = &contexts[d];
  return kSuccess;
}
int cuDevicePrimaryCtxReset_v2(int) {
  // Every kernel stops; what the context held is gone (the test process never uses it again).
  std::lock_guard<std::mutex> lock(mu);
  end_hang(&legacy);
  for (Stream* s : hung) end_hang(s);
  hung.clear();
  registered.clear();
  device_memory.clear();  // leaked: the test process never reads it again
  live.clear();
  return kSuccess;
}
int cuCtxSetCurrent(void* ctx) {
  current_ctx = ctx;
  return kSuccess;
}
int cuStreamCreate(void** s, unsigned flags) {
  std::lock_guard<std::mutex> lock(mu);
  auto* st = new Stream;
  st->ctx = current_ctx;
  st->blocking = (flags & 1u) == 0;
  *s = st;
  live.insert(*s);
  return kSuccess;
}
int cuStreamGetCtx(void* s, void** ctx) {
  std::lock_guard<std::mutex> lock(mu);
  if (!known(s)) return kInvalidHandle;
  *ctx = is_default(s) ? current_ctx : static_cast<Stream*>(s)->ctx;
  return kSuccess;
}
int cuStreamDestroy_v2(void* s) {
  std::lock_guard<std::mutex> lock(mu);
  if (s == nullptr || live.erase(s) == 0) return kInvalidHandle;
  return kSuccess;  // leaked on purpose: a stale handle must not be reused by a new object
}
int cuStreamQuery(void* s) {
  std::lock_guard<std::mutex> lock(mu);
  if (!known(s)) return kInvalidHandle;
  poll();
  return stream_of(s)->hung ? kNotReady : kSuccess;
}
int cuStreamSynchronize(void* s) {
  for (;;) {  // until the hung kernel stops (another thread may set its word)
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!known(s)) return kInvalidHandle;
      poll();
      if (!stream_of(s)->hung) return kSuccess;
      if (stream_of(s)->word == nullptr) std::abort();  // would wait forever: a test bug
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
int cuEventCreate(void** e, unsigned) {
  std::lock_guard<std::mutex> lock(mu);
  *e = new Event;
  live.insert(*e);
  return kSuccess;
}
int cuEventDestroy_v2(void* e) {
  std::lock_guard<std::mutex> lock(mu);
  return live.erase(e) ? kSuccess : kInvalidHandle;
}
int cuEventRecord(void* e, void* s) {
  std::lock_guard<std::mutex> lock(mu);
  if (!known(e) || !known(s) || !current(s)) return kInvalidHandle;
  auto* ev = static_cast<Event*>(e);
  ev->recorded = true;
  Stream* st = stream_of(s);
  ev->after = st->hung ? st : nullptr;
  ev->hang = st->hangs;
  return kSuccess;
}
int cuEventQuery(void* e) {
  std::lock_guard<std::mutex> lock(mu);
  if (!known(e)) return kInvalidHandle;
  poll();
  return static_cast<Event*>(e)->hung() ? kNotReady : kSuccess;
}
int cuEventSynchronize(void* e) {
  std::lock_guard<std::mutex> lock(mu);
  if (!known(e)) return kInvalidHandle;
  poll();
  if (static_cast<Event*>(e)->hung()) std::abort();
  return kSuccess;
}
int cuEventElapsedTime(float* ms, void* start, void* end) {
  std::lock_guard<std::mutex> lock(mu);
  if (!known(start) || !known(end)) return kInvalidHandle;
  if (!static_cast<Event*>(start)->recorded || !static_cast<Event*>(end)->recorded)
    return kInvalidHandle;
  *ms = 0.25f;
  return kSuccess;
}
int cuStreamWaitEvent(void* s, void* e, unsigned) {
  std::lock_guard<std::mutex> lock(mu);
  return known(s) && known(e) ? kSuccess : kInvalidHandle;
}
int cuModuleLoadData(void** m, const void*) {
  std::lock_guard<std::mutex> lock(mu);
  *m = new Module;
  live.insert(*m);
  return kSuccess;
}
int cuModuleUnload(void* m) {
  std::lock_guard<std::mutex> lock(mu);
  return live.erase(m) ? kSuccess : kInvalidHandle;
}
int cuModuleGetFunction(void** f, void* m, const char* name) {
  std::lock_guard<std::mutex> lock(mu);
  if (!known(m)) return kInvalidHandle;
  *f = new Function{name};
  live.insert(*f);
  return kSuccess;
}
int cuFuncSetAttribute(void*, int, int) { return kSuccess; }
int cuFuncGetAttribute(int* v, int, void*) { *v = 32; return kSuccess; }
int cuLaunchKernel(void* f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                   void* s, void** params, void**) {
  std::lock_guard<std::mutex> lock(mu);
  // A function of a module loaded before a reset is gone with it.
  if (!known(f) || f == nullptr || !known(s) || !current(s)) return kInvalidHandle;
  poll();
  const std::string& name = static_cast<Function*>(f)->name;
  if (name.find("hang") == std::string::npos) return kSuccess;
  Stream* st = stream_of(s);
  st->hung = true;
  ++st->hangs;
  st->word = nullptr;
  st->copy = nullptr;
  st->drains = name.find("drain") != std::string::npos;
  hung.insert(st);
  if (name.find("nopoll") != std::string::npos || params == nullptr || params[0] == nullptr ||
      params[1] == nullptr)
    return kSuccess;
  size_t last = 1;
  while (params[last + 1] != nullptr) ++last;
  auto address = [&](size_t i) { return *static_cast<unsigned long long*>(params[i]); };
  st->word = word_in(registered, address(last - 1), kMapOffset);
  st->copy = word_in(device_memory, address(last), 0);
  if (st->word == nullptr || st->copy == nullptr) st->word = st->copy = nullptr;  // reads neither
  poll();  // a copy already set stops it at its first check
  return kSuccess;
}
int cuMemHostRegister_v2(void* p, size_t bytes, unsigned flags) {
  std::lock_guard<std::mutex> lock(mu);
  if (flags != 2 /* DEVICEMAP */ || bytes == 0) return kInvalidValue;
  if (registered.count(p)) return kAlreadyRegistered;
  registered[p] = bytes;
  return kSuccess;
}
int cuMemHostGetDevicePointer_v2(unsigned long long* d, void* p, unsigned) {
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [host, bytes] : registered)
    if (p >= host && static_cast<char*>(p) < static_cast<char*>(host) + bytes) {
      *d = reinterpret_cast<unsigned long long>(p) + kMapOffset;
      return kSuccess;
    }
  return kInvalidValue;
}
int cuMemAllocManaged(unsigned long long* p, size_t n, unsigned) {
  void* m = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (m == nullptr) return 2;
  *p = reinterpret_cast<unsigned long long>(m);
  std::lock_guard<std::mutex> lock(mu);
  remember(*p, n);
  return kSuccess;
}
int cuMemAlloc_v2(unsigned long long* p, size_t n) {
  void* m = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (m == nullptr) return 2;
  *p = reinterpret_cast<unsigned long long>(m);
  std::lock_guard<std::mutex> lock(mu);
  device_memory[*p] = n;
  remember(*p, n);
  return kSuccess;
}
int cuMemFree_v2(unsigned long long p) {
  {
    std::lock_guard<std::mutex> lock(mu);
    device_memory.erase(p);
    allocations.erase(p);
  }
  std::free(reinterpret_cast<void*>(p));
  return kSuccess;
}
int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void* src, size_t n, void* s) {
  std::lock_guard<std::mutex> lock(mu);
  if (!known(s) || !current(s)) return kInvalidHandle;
  auto in = device_memory.upper_bound(dst);
  if (in == device_memory.begin() || dst + n > std::prev(in)->first + std::prev(in)->second)
    return kInvalidValue;  // only into cuMemAlloc'd memory
  if (!behind_hang(s)) std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return kSuccess;
}
int cuMemGetAddressRange_v2(unsigned long long* base, size_t* size, unsigned long long p) {
  std::lock_guard<std::mutex> lock(mu);
  auto a = allocation_of(p);
  if (a == allocations.end()) return kInvalidValue;
  if (base != nullptr) *base = a->first;
  if (size != nullptr) *size = a->second.bytes;
  return kSuccess;
}
int cuPointerGetAttribute(void* out, int attribute, unsigned long long p) {
  constexpr int kDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
  std::lock_guard<std::mutex> lock(mu);
  auto a = allocation_of(p);
  if (a == allocations.end() || attribute != kDeviceOrdinal) return kInvalidValue;
  *static_cast<int*>(out) = a->second.ordinal;
  return kSuccess;
}
int cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  *free_bytes = size_t{1} << 32;
  *total = size_t{1} << 33;
  return kSuccess;
}
int cuMemsetD8_v2(unsigned long long p, unsigned char v, size_t n) {
  std::memset(reinterpret_cast<void*>(p), v, n);
  return kSuccess;
}
int cuMemPrefetchAsync_v2(unsigned long long, size_t, MemLocation, unsigned, void*) {
  return kSuccess;
}
int cuGetErrorName(int r, const char** s) {
  *s = r == kInvalidHandle ? "CUDA_ERROR_INVALID_HANDLE"
       : r == kNotReady    ? "CUDA_ERROR_NOT_READY"
       : r == kInvalidValue ? "CUDA_ERROR_INVALID_VALUE"
       : r == kLaunchFailed ? "CUDA_ERROR_LAUNCH_FAILED"
                            : "CUDA_ERROR_STANDIN";
  return kSuccess;
}
int cuGetErrorString(int, const char** s) {
  *s = "the stand-in driver refused it";
  return kSuccess;
}

}  // extern "C"
