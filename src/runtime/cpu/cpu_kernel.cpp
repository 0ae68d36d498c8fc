// Loading and launching cpu kernels. A launch hands the pool chunks of the grid's linear
// instance ids; each chunk is one ffi_call of the entry point with that chunk's mt_range. Grids
// that measured cheap run entirely on the calling thread, so tiny launches cost one ffi_call.
#include "runtime/cpu/cpu_kernel.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "codegen/cpu_cpp.h"
#include "runtime/host/cancel.h"
#include "runtime/host/parallel_for.h"
#include "support/env.h"
#include "support/error.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "ffi argument slots hold scalars in their low-order bytes");

namespace metile::cpu {

namespace {

// Mirrors mt_range in the CPU prelude.
struct Range {
  uint32_t grid[3];
  uint32_t fault;
  uint64_t begin, end;
  uint32_t stream;
};

// Below this much work a launch runs on the calling thread: waking a worker costs more.
constexpr double kInlineNs = 20000;
// Stack the calling thread keeps free beyond what a program instance declares.
constexpr size_t kStackMargin = size_t{256} << 10;

size_t caller_stack_room() {
  thread_local char* low = nullptr;
  if (low == nullptr) {
    pthread_attr_t attr;
    void* addr = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &addr, &size);
      pthread_attr_destroy(&attr);
    }
    low = static_cast<char*>(addr);
  }
  char* sp = static_cast<char*>(__builtin_frame_address(0));
  return low != nullptr && sp > low ? static_cast<size_t>(sp - low) : 0;
}

ffi_type* ffi_type_of(const Type& t) {
  if (t.is_ptr) return &ffi_type_pointer;
  switch (t.dtype) {
    case DType::f32: return &ffi_type_float;
    case DType::f16:
    case DType::bf16: return &ffi_type_uint16;
    case DType::i32: return &ffi_type_sint32;
    case DType::u32: return &ffi_type_uint32;
    case DType::i64: return &ffi_type_sint64;
    case DType::boolean:
    case DType::u8: return &ffi_type_uint8;
    case DType::i8: return &ffi_type_sint8;
    default: fail(METILE_ERROR_INTERNAL, "cpu", "no ffi type for ", t.str());
  }
}

struct ChunkContext {
  const ffi_cif* cif;
  void (*entry)();
  void** argv;
  size_t nargs;  // including the range slot
  const Grid* grid;
  std::atomic<uint32_t>* fault;  // the first fault code any chunk reported
  bool stream;
  // Chunks run in slices of this many instances, checking `stop` (METILE_TIMEOUT_S,
  // metile_cancel_launches) between them; `stopped` tells the other chunks.
  uint64_t slice;
  const host::LaunchStop* stop;
  std::atomic<bool>* stopped;
};

void run_chunk(void* p, uint64_t begin, uint64_t end) {
  const ChunkContext& c = *static_cast<const ChunkContext*>(p);
  void* small[32];
  std::vector<void*> big;
  void** argv = small;
  if (c.nargs > 32) {
    big.resize(c.nargs);
    argv = big.data();
  }
  std::memcpy(argv, c.argv, (c.nargs - 1) * sizeof(void*));
  for (uint64_t at = begin; at < end;) {
    if (c.stopped->load(std::memory_order_relaxed)) return;
    if (c.stop->should_stop()) {
      c.stopped->store(true, std::memory_order_relaxed);
      return;
    }
    uint64_t to = end - at > c.slice ? at + c.slice : end;
    Range range{{c.grid->dims[0], c.grid->dims[1], c.grid->dims[2]}, 0, at, to, c.stream};
    Range* rp = &range;
    argv[c.nargs - 1] = &rp;
    ffi_call(const_cast<ffi_cif*>(c.cif), c.entry, nullptr, argv);
    if (range.fault != 0) {  // the entry stopped at the fault: so does the rest of this chunk
      uint32_t none = 0;
      c.fault->compare_exchange_strong(none, range.fault);
      return;
    }
    at = to;
  }
}

class CpuLaunch : public PreparedLaunch {
 public:
  CpuLaunch(std::shared_ptr<const CpuKernel> k, const Grid& g, std::vector<LaunchArg> a)
      : kernel_(std::move(k)), slots_(kernel_->num_params()), argv_(kernel_->num_params() + 1) {
    grid = g;
    args = std::move(a);
    for (size_t i = 0; i < slots_.size(); ++i) argv_[i] = &slots_[i];
    update();
  }
  void update() override {
    for (size_t i = 0; i < slots_.size(); ++i) kernel_->fill_slot(i, args[i], &slots_[i]);
    stream_ = streams_past_cache(args);
  }
  void run() override { kernel_->execute(grid, argv_.data(), stream_); }

 private:
  std::shared_ptr<const CpuKernel> kernel_;
  std::vector<uint64_t> slots_;
  std::vector<void*> argv_;
  bool stream_ = false;
};

uint64_t last_level_cache_bytes() {
  long n = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (n <= 0) n = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return n > 0 ? static_cast<uint64_t>(n) : uint64_t{32} << 20;
}

}  // namespace

bool streams_past_cache(const std::vector<LaunchArg>& args) {
  static const uint64_t cache = last_level_cache_bytes();
  long long limit = env_int("METILE_CPU_STREAM_MIN_BYTES", -1);
  uint64_t min_bytes = limit >= 0 ? static_cast<uint64_t>(limit) : cache;
  uint64_t total = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const Buffer* b = args[i].buffer;
    if (b == nullptr) continue;
    bool seen = false;  // a buffer passed twice is touched once
    for (size_t j = 0; j < i && !seen; ++j) seen = args[j].buffer == b;
    if (!seen && args[i].offset < b->size()) total += b->size() - args[i].offset;
  }
  return total >= min_bytes;
}

CpuKernel::CpuKernel(std::shared_ptr<const Program> program, const Artifact& artifact)
    : program_(std::move(program)), object_(artifact.bytes, "cpu", program_->name) {
  entry_ = reinterpret_cast<void (*)()>(object_.symbol("metile_entry"));
  stack_bytes_ = *static_cast<const uint64_t*>(object_.symbol("metile_stack_bytes"));
  for (const Param& prm : program_->params) types_.push_back(ffi_type_of(program_->type(prm.value)));
  types_.push_back(&ffi_type_pointer);  // mt_range*
  if (ffi_prep_cif(&cif_, FFI_DEFAULT_ABI, static_cast<unsigned>(types_.size()), &ffi_type_void,
                   types_.data()) != FFI_OK)
    fail(METILE_ERROR_INTERNAL, "cpu", "ffi_prep_cif failed for kernel ", program_->name);
}

void CpuKernel::fill_slot(size_t i, const LaunchArg& arg, uint64_t* slot) const {
  const Type& t = program_->type(program_->params[i].value);
  if (t.is_ptr) {
    void* p = static_cast<char*>(arg.buffer->contents()) + arg.offset;
    std::memcpy(slot, &p, sizeof p);
  } else {
    *slot = arg.bits;
  }
}

void CpuKernel::execute(const Grid& grid, void** argv, bool stream) const {
  std::atomic<uint32_t> fault{0};
  uint64_t total = grid.count();
  host::LaunchStop stop;
  std::atomic<bool> stopped{false};
  // Slices of about 10 ms by the running estimate of an instance's time (64 instances before
  // there is one), so a cancel or the time limit takes effect that soon.
  double guess = ns_per_instance_.load(std::memory_order_relaxed);
  uint64_t slice = guess > 0 ? static_cast<uint64_t>(std::clamp(1e7 / guess, 1.0, 1e9)) : 64;
  ChunkContext ctx{&cif_, entry_, argv, types_.size(), &grid, &fault, stream, slice, &stop,
                   &stopped};
  host::ThreadPool& pool = host::ThreadPool::instance();
  bool caller_can_run = caller_stack_room() > stack_bytes_ + stack_bytes_ / 4 + kStackMargin;
  double est = ns_per_instance_.load(std::memory_order_relaxed);
  bool small = total == 1 || (est > 0 && est * static_cast<double>(total) < kInlineNs);
  auto start = std::chrono::steady_clock::now();
  int threads = 1;
  if (caller_can_run && (small || pool.concurrency() == 1)) {
    run_chunk(&ctx, 0, total);
  } else {
    host::Job job;
    job.run = run_chunk;
    job.ctx = &ctx;
    job.total = total;
    threads = pool.concurrency();
    // Many small chunks: a descheduled thread holding a chunk delays the whole launch.
    job.chunk = std::max<uint64_t>(1, total / (static_cast<uint64_t>(threads) * 16));
    pool.run(job, caller_can_run);
  }
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  double per = ns * threads / static_cast<double>(total);
  ns_per_instance_.store(est > 0 ? 0.75 * est + 0.25 * per : per, std::memory_order_relaxed);
  if (stopped.load()) fail(METILE_ERROR_DEVICE, "cpu", stop.why(program_->name));
  if (uint32_t code = fault.load()) {
    const Op* loop = cpu_fault_loop(*program_, code);
    fail(METILE_ERROR_DEVICE, "cpu", loop ? program_->where(loop->loc) : std::string(),
         program_->name, ": for: step is 0 (the loop would never end)");
  }
}

std::unique_ptr<PreparedLaunch> CpuKernel::prepare(const Grid& grid, std::vector<LaunchArg> args) {
  return std::make_unique<CpuLaunch>(shared_from_this(), grid, std::move(args));
}

void CpuKernel::launch(const Grid& grid, std::vector<LaunchArg> args) {
  size_t n = num_params();
  uint64_t small_slots[31];
  void* small_argv[32];
  std::vector<uint64_t> big_slots;
  std::vector<void*> big_argv;
  uint64_t* slots = small_slots;
  void** argv = small_argv;
  if (n >= 31) {
    big_slots.resize(n);
    big_argv.resize(n + 1);
    slots = big_slots.data();
    argv = big_argv.data();
  }
  for (size_t i = 0; i < n; ++i) {
    fill_slot(i, args[i], &slots[i]);
    argv[i] = &slots[i];
  }
  execute(grid, argv, streams_past_cache(args));
}

}  // namespace metile::cpu
