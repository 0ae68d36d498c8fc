#include "runtime/cuda/cuda_device.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "codegen/cuda/cuda.h"
#include "ir/gpu_ir.h"
#include "passes/pipeline.h"
#include "runtime/backends.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/tma_map.h"
#include "runtime/host/cancel.h"
#include "runtime/host/cancel_words.h"
#include "support/env.h"
#include "support/error.h"
#include "target/gpu_target.h"

namespace metile {

using namespace cuda;

namespace {

class CudaDevice;

// How long a kernel asked to stop (its stop word set) may take to reach a check and leave
// before the watchdog resets the context: a check comes at every loop back-edge and before a
// program's first write where no loop comes first.
constexpr auto kStopGrace = std::chrono::seconds(1);
// How long a kernel that answered (some thread left at a check) may take for the rest of its
// grid to leave: every program still to run starts, reads the word and leaves at once, and a
// grid of 2^30 such programs takes about a second on an H100 just to be scheduled.
constexpr auto kDrainGrace = std::chrono::seconds(30);

/**
 * Passes metile_cancel_launches() on to the copies of the stop words in GPU memory, which
 * kernels read: the cancel may come from a signal handler, where no driver call is allowed, so
 * it only sets the host words and writes a notice (host::stop_notice_fd()); this thread then
 * has each open cuda device copy its stopped words over. Never destroyed: the thread outlives
 * every device and waits until the process ends.
 */
class StopForwarder {
 public:
  static StopForwarder& get() {
    static StopForwarder* f = new StopForwarder;
    return *f;
  }
  void add(CudaDevice* d) {
    std::lock_guard<std::mutex> lock(mu_);
    devices_.insert(d);
  }
  void remove(CudaDevice* d) {
    std::lock_guard<std::mutex> lock(mu_);  // not while its copy runs
    devices_.erase(d);
  }

 private:
  StopForwarder() {
    if (int fd = host::stop_notice_fd(); fd >= 0) std::thread([this, fd] { run(fd); }).detach();
  }
  void run(int fd);

  std::mutex mu_;
  std::set<CudaDevice*> devices_;
};

/** Everything made in the GPU's context before a reset (cuda watchdog) is gone with it. */
[[noreturn]] void gone(const char* what, const std::string& label) {
  fail(METILE_ERROR_INVALID_ARGUMENT, "cuda", what, " was made before the ", label,
       " device was reset (a launch ran past its time limit): its memory is gone; make a new one");
}

/** The GPU of each primary context metile opened, so an error can name a stream's device. */
std::mutex g_contexts_mu;
std::map<CUcontext, std::string> g_context_labels;

void name_context(CUcontext ctx, std::string label) {
  std::lock_guard<std::mutex> lock(g_contexts_mu);
  g_context_labels[ctx] = std::move(label);
}

std::string stream_text(uint64_t stream) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(stream));
  return text;
}

class CudaBuffer : public Buffer {
 public:
  CudaBuffer(const Driver* d, CUdeviceptr p, size_t n, bool owned, void* host, uint64_t generation)
      : d_(d), ptr_(p), size_(n), owned_(owned), host_(host), generation_(generation) {}
  ~CudaBuffer() override;
  void* contents() override;
  uint64_t device_address() override { return ptr_; }
  size_t size() const override { return size_; }
  bool shares_memory() const override { return !owned_; }
  /** Managed memory this device allocated (the only kind prefetching applies to). */
  bool owned() const { return owned_; }
  /** False once the device was reset after it was made. */
  bool live() const;
  bool host_dirty = true;

 private:
  const Driver* d_;
  CUdeviceptr ptr_;
  size_t size_;
  bool owned_;
  void* host_;
  uint64_t generation_;
};

class CudaDevice : public Device {
 public:
  explicit CudaDevice(int ordinal) {
    std::string why;
    d_ = load_driver(&why);
    if (d_ == nullptr) fail(METILE_ERROR_DEVICE_UNAVAILABLE, "cuda", why);
    int count = 0;
    check(d_->cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= count)
      fail(METILE_ERROR_DEVICE_UNAVAILABLE, "cuda", "cuda:", ordinal, " does not exist: this machine has ",
           count, count == 1 ? " CUDA device (cuda:0)" : cat(" CUDA devices (cuda:0 to cuda:", count - 1, ")"));
    check(d_->cuDeviceGet(&dev_, ordinal), "cuDeviceGet");
    check(d_->cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
    make_current();
    check(d_->cuStreamCreate(&stream_, 0), "cuStreamCreate");
    map_words();
    word_ = take_word();
    info_.ordinal = ordinal;
    info_.indexed = true;
    name_context(ctx_, cat("cuda:", ordinal));
    char name[256] = {};
    d_->cuDeviceGetName(name, sizeof name, dev_);
    int major = 0, minor = 0, threads = 0, smem = 0, pageable = 0, version = 0;
    d_->cuDeviceGetAttribute(&major, kAttrComputeMajor, dev_);
    d_->cuDeviceGetAttribute(&minor, kAttrComputeMinor, dev_);
    d_->cuDeviceGetAttribute(&threads, kAttrMaxThreadsPerBlock, dev_);
    d_->cuDeviceGetAttribute(&smem, kAttrMaxSharedPerBlockOptin, dev_);
    d_->cuDeviceGetAttribute(&pageable, kAttrPageableMemoryAccess, dev_);
    d_->cuDriverGetVersion(&version);
    pageable_ = pageable != 0;
    info_.name = "cuda";
    info_.description = name;
    info_.architecture = "sm_" + std::to_string(major) + std::to_string(minor);
    info_.simd_width = 32;
    info_.max_threads_per_group = threads;
    info_.threadgroup_memory_bytes = static_cast<uint64_t>(smem);
    info_.unified_memory = true;
    info_.asynchronous = true;
    info_.lowers_fp8_dots = true;  // wgmma FP8 on sm_90, else f16 staging (dot_choices.cpp)
    identity_ = "cuda;" + info_.architecture + ";" + nvrtc_version() + ";driver " +
                std::to_string(version);
    wgmma_ = cuda_wgmma_enabled();
    if (!wgmma_) identity_ += ";no wgmma";
    StopForwarder::get().add(this);  // last: a constructor that threw runs no destructor
  }

  // The context, its memory and streams stay: the primary context is never released.
  ~CudaDevice() override { StopForwarder::get().remove(this); }

  const DeviceInfo& info() const override { return info_; }
  std::string cache_identity() const override { return identity_; }

  void make_current() const {
    // The driver keeps the current context per OS thread; every entry point may be on a new one.
    // A reset keeps the primary context's handle, so the generation tells a stale one apart.
    thread_local CUcontext current = nullptr;
    thread_local uint64_t current_generation = 0;
    uint64_t g = generation();
    if (current != ctx_ || current_generation != g) {
      check(d_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
      current = ctx_;
      current_generation = g;
    }
  }

  /**
   * Maps the stop words into the GPU's context and makes their copy in GPU memory, which
   * kernels read (again after a reset, which unmaps and frees them). A kernel writes its answer
   * into the host word, which the host reads; it reads the copy, an L2 read, because a read of
   * host memory is a round trip over PCIe, too slow for every program of a grid to make.
   */
  void map_words() {
    CUresult r = d_->cuMemHostRegister(words_.memory(), host::CancelWords::kBytes, kHostRegisterDeviceMap);
    if (r != kErrorHostMemoryAlreadyRegistered) check(r, "cuMemHostRegister (the launches' stop words)");
    check(d_->cuMemHostGetDevicePointer(&words_device_, words_.memory(), 0),
          "cuMemHostGetDevicePointer (the launches' stop words)");
    // Non-blocking: the copies must not wait for the kernels of the legacy stream, which may
    // be the ones to stop.
    check(d_->cuStreamCreate(&copy_stream_, kStreamNonBlocking), "cuStreamCreate (the stop words' copies)");
    check(d_->cuMemAlloc(&words_copy_, host::CancelWords::kBytes), "cuMemAlloc (the stop words' copy)");
    check(copy_words(0, host::CancelWords::kCount, true), "copying the stop words to the GPU");
  }

  /**
   * Copies host words [first, first + count) to their copy in GPU memory on copy_stream_: a DMA
   * from the pinned words, which needs no multiprocessor (the kernel to stop may hold them all).
   * `wait`: returns once the copy landed.
   */
  CUresult copy_words(int first, int count, bool wait) {
    const uint64_t at = host::CancelWords::offset(first);
    CUresult r = d_->cuMemcpyHtoDAsync(words_copy_ + at, static_cast<const char*>(words_.memory()) + at,
                                       host::CancelWords::offset(count), copy_stream_);
    if (r == 0 && wait) r = d_->cuStreamSynchronize(copy_stream_);
    return r;
  }

  /** A free word for launches (mu_ held, or in the constructor): its copy says "run" before
   * any kernel reads it, where an earlier launch's stop may have left it set. */
  int take_word() {
    int w = words_.take();
    if (w >= 0) check(copy_words(w, 1, true), "clearing a stop word's copy in GPU memory");
    return w;
  }

  /** Asks the kernels reading word `w` to stop (mu_ held). */
  void stop_word(int w) {
    words_.stop(w);
    // Not checked: a copy that fails leaves the kernel to the reset after kStopGrace.
    copy_words(w, 1, false);
  }

  /** After a cancel (StopForwarder): the stops it set in this device's words reach their copy. */
  void copy_stops() {
    std::lock_guard<std::mutex> lock(mu_);
    make_current();
    for (int w : words_in_use())
      if (w >= 0 && words_.get(w) != host::kWordRun) copy_words(w, 1, false);
  }

  /** The words kernels may still read (mu_ held): those a cancel retired and the current one. */
  std::vector<int> words_in_use() const {
    std::vector<int> in_use = retired_words_;
    in_use.push_back(word_);
    return in_use;
  }

  /** The GPU addresses of a launch's stop word and of its copy. */
  struct LaunchWord {
    CUdeviceptr host = 0, copy = 0;
  };

  /**
   * The stop word for a launch of `kernel` now. Launches share one word; once a cancel set it,
   * later launches get a fresh one while the kernels before may still be reading the old one
   * (it is released when synchronize() saw them finish).
   */
  LaunchWord launch_word(const std::string& kernel) {
    std::lock_guard<std::mutex> lock(mu_);
    if (words_.get(word_) != host::kWordRun) {
      int fresh = take_word();
      if (fresh < 0)
        fail(METILE_ERROR_DEVICE, "cuda", "kernel ", kernel, ": every stop word is taken by a launch "
             "cancelled before: synchronize the ", info_.label(), " device");
      retired_words_.push_back(word_);
      word_ = fresh;
    }
    last_kernel_ = kernel;
    const uint64_t at = host::CancelWords::offset(word_);
    return {words_device_ + at, words_copy_ + at};
  }

  /** Bumped by each reset: what was made in an older generation is gone. */
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  std::shared_ptr<Buffer> alloc(size_t bytes) override {
    make_current();
    size_t free_bytes = 0, total = 0;
    check(d_->cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
    // Managed memory larger than what the card has free can hang the GPU: refuse it up front.
    if (bytes > free_bytes)
      fail(METILE_ERROR_OUT_OF_MEMORY, "cuda", "cannot allocate ", bytes, " bytes: the GPU has ",
           free_bytes, " bytes free");
    CUdeviceptr p = 0;
    check(d_->cuMemAllocManaged(&p, bytes, kMemAttachGlobal), "cuMemAllocManaged");
    auto buf = std::make_shared<CudaBuffer>(d_, p, bytes, true, nullptr, generation());
    CUresult r = d_->cuMemsetD8(p, 0, bytes);
    if (r == 0) r = d_->cuStreamSynchronize(nullptr);
    check(r, "zeroing a new buffer");
    buf->device = this;
    return buf;
  }

  std::shared_ptr<Buffer> wrap(void* host, size_t bytes) override {
    if (pageable_) {
      // The GPU reads pageable host memory coherently (HMM/ATS): use it in place.
      // The caller's memory outlives a reset: generation 0 is never stale.
      auto buf = std::make_shared<CudaBuffer>(d_, reinterpret_cast<CUdeviceptr>(host), bytes,
                                              false, host, 0);
      buf->device = this;
      return buf;
    }
    auto buf = alloc(bytes);
    std::memcpy(buf->contents(), host, bytes);
    return buf;
  }

  std::shared_ptr<Buffer> wrap_device_memory(uint64_t address, size_t bytes,
                                             bool host_accessible) override {
    // Kernels use it in place; the host reads it only when it is managed memory.
    auto buf = std::make_shared<CudaBuffer>(
        d_, address, bytes, false, host_accessible ? reinterpret_cast<void*>(address) : nullptr,
        generation());
    buf->device = this;
    return buf;
  }

  void check_device_memory(uint64_t address, size_t bytes) override {
    if (d_->cuMemGetAddressRange == nullptr || d_->cuPointerGetAttribute == nullptr)
      fail(METILE_ERROR_UNSUPPORTED, "cuda", "the driver cannot say which allocation 0x", std::hex,
           address, std::dec, " belongs to (no cuMemGetAddressRange); import the memory through "
           "DLPack instead");
    make_current();
    CUdeviceptr base = 0;
    size_t size = 0;
    if (d_->cuMemGetAddressRange(&base, &size, address) != 0)
      fail(METILE_ERROR_INVALID_ARGUMENT, "cuda", "0x", std::hex, address, std::dec,
           " is not in any allocation of GPU memory");
    if (address - base > size || bytes > size - (address - base))
      fail(METILE_ERROR_INVALID_ARGUMENT, "cuda", bytes, " bytes at 0x", std::hex, address,
           " run past the end of their allocation (", std::dec, size, " bytes at 0x", std::hex,
           base, ")");
    int ordinal = -1;
    constexpr int kPointerAttrDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    if (d_->cuPointerGetAttribute(&ordinal, kPointerAttrDeviceOrdinal, address) != 0 ||
        ordinal != info_.ordinal)
      fail(METILE_ERROR_INVALID_ARGUMENT, "cuda", "the memory at 0x", std::hex, address, std::dec,
           " belongs to cuda:", ordinal, ", the device is ", info_.label());
  }

  void synchronize() override {
    make_current();
    std::vector<CUstream> streams{stream_};
    {
      std::lock_guard<std::mutex> lock(mu_);
      streams.insert(streams.end(), used_streams_.begin(), used_streams_.end());
      used_streams_.clear();
    }
    for (CUstream s : streams)
      wait([&] { return d_->cuStreamQuery(s); }, [&] { return d_->cuStreamSynchronize(s); },
           "cuStreamSynchronize");
    std::lock_guard<std::mutex> lock(mu_);  // no kernel reads a retired word any more
    for (int w : retired_words_) release_word(w);
    retired_words_.clear();
  }

  /** A word no kernel reads any more goes back to the pool (its stop, if any, was reported). */
  void release_word(int w) {
    words_.release(w);
    reported_words_.erase(w);
  }

  /**
   * Waits until `query` stops answering CUDA_ERROR_NOT_READY (`block` does it in one call when no
   * launch has a time limit). Past a watched launch's deadline the running kernels are asked to
   * stop (their stop word): their threads leave at the next check, the launch ends, and the wait
   * fails saying the outputs are partly written (stopped_early); kernels that reach no check
   * within kStopGrace are ended by a reset of the context.
   */
  template <typename Query, typename Block>
  void wait(Query query, Block block, const char* what) {
    if (!watching()) {
      if (CUresult r = block(); r != 0) failed(r, what);
      if (std::optional<std::string> why = stopped_early()) fail(METILE_ERROR_DEVICE, "cuda", *why);
      return;
    }
    // Polls back off to 0.5 ms: a wait ends at most that late, for little host time.
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      CUresult r = query();
      if (r == 0) break;
      if (r != kErrorNotReady) failed(r, what);
      enforce_limits();
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(500));
    }
    std::optional<std::string> why = stopped_early();
    forget_finished();
    if (why) fail(METILE_ERROR_DEVICE, "cuda", *why);
  }

  /** Whether a kernel of a word in use answered its stop since the last stop a wait reported: a
   * thread left at a check (mu_ held). */
  bool answered() const {
    for (int w : words_in_use())
      if (words_.get(w) == host::kWordStopped && !reported_words_.count(w)) return true;
    return false;
  }

  /**
   * After a wait that succeeded: why, when a kernel whose word was set answered that it stopped
   * at a check (its outputs are then partly written); nothing when every kernel ran to its end.
   * Each word's stop is reported once, by the first wait that sees it.
   */
  std::optional<std::string> stopped_early() {
    std::lock_guard<std::mutex> lock(mu_);
    bool stopped = false;
    for (int w : words_in_use())
      if (words_.get(w) == host::kWordStopped && reported_words_.insert(w).second) stopped = true;
    if (!stopped) return std::nullopt;
    return cat(stop_cause(), "; its outputs are partly written");
  }

  /** Why the host stopped its launches (mu_ held): a watched launch's time limit, else a cancel. */
  std::string stop_cause() const {
    for (const Watched& w : watched_)
      if (w.asked) return cat(w.limit.exceeded(w.kernel), " and was stopped");
    return cat("kernel ", last_kernel_.empty() ? std::string("?") : last_kernel_,
               " (the last launched) was cancelled (metile_cancel_launches, e.g. Ctrl-C) and stopped");
  }

  /** A launch with a time limit: an event after it, polled while the host waits. */
  struct Watched {
    CUevent done;
    std::chrono::steady_clock::time_point deadline;
    host::LaunchLimit limit;
    std::string kernel;
    bool asked = false;  // its deadline passed: the stop word was set at asked_at
    std::chrono::steady_clock::time_point asked_at;
  };

  void watch(CUstream s, const host::LaunchLimit& limit, const std::string& kernel) {
    forget_finished();
    CUevent e = nullptr;
    check(d_->cuEventCreate(&e, kEventDisableTiming), "cuEventCreate");
    CUresult r = d_->cuEventRecord(e, s);
    if (r != 0) d_->cuEventDestroy(e);
    check(r, "cuEventRecord");
    std::lock_guard<std::mutex> lock(mu_);
    watched_.push_back({e, limit.deadline_from_now(), limit, kernel, false, {}});
  }

  bool watching() {
    std::lock_guard<std::mutex> lock(mu_);
    return !watched_.empty();
  }

  void forget_finished() {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(watched_, [&](const Watched& w) {
      if (d_->cuEventQuery(w.done) != 0) return false;
      d_->cuEventDestroy(w.done);
      return true;
    });
  }

  /** Sets the stop word when a watched launch still runs past its deadline, and resets the
   * context when the kernels have not answered kStopGrace after that, or answered but have not
   * ended kDrainGrace after it. */
  void enforce_limits() {
    auto now = std::chrono::steady_clock::now();
    std::optional<std::string> unstopped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Watched& w : watched_) {
        if (now < w.deadline || d_->cuEventQuery(w.done) != kErrorNotReady) continue;
        if (!w.asked) {
          w.asked = true;
          w.asked_at = now;
          stop_word(word_);  // whatever runs now stops: the reset would end it anyway
        } else if (!unstopped && now - w.asked_at >= kStopGrace) {
          if (!answered())
            unstopped = cat(w.limit.exceeded(w.kernel), " and did not stop when asked (within ",
                            std::chrono::duration<double>(kStopGrace).count(),
                            " s: it reached no check of its stop word)");
          else if (now - w.asked_at >= kDrainGrace)
            unstopped = cat(w.limit.exceeded(w.kernel), " and was asked to stop, but its programs still to run did "
                            "not all leave within ", std::chrono::duration<double>(kDrainGrace).count(), " s");
        }
      }
    }
    if (unstopped) reset_after(*unstopped);
  }

  /** Why launches failed when the host had asked them to stop (a time limit, a cancel), else
   * nothing: then the failure is the kernel's own. */
  std::optional<std::string> stop_reason() {
    std::lock_guard<std::mutex> lock(mu_);
    bool stopped = words_.get(word_) != host::kWordRun;
    for (const Watched& w : watched_) stopped = stopped || w.asked;
    for (int w : retired_words_) stopped = stopped || words_.get(w) == host::kWordStopped;
    if (!stopped) return std::nullopt;
    return stop_cause();
  }

  /** A CUDA call of a wait or launch failed: a launch the host stopped resets the context and
   * says why; any other failure is reported as it is. */
  [[noreturn]] void failed(CUresult r, const char* what) {
    if (std::optional<std::string> why = stop_reason()) {
      const char* name = "?";
      d_->cuGetErrorName(r, &name);
      reset_after(cat(*why, " (", name, ")"));
    }
    check(r, what);
    fail(METILE_ERROR_INTERNAL, "cuda", what, " failed with status 0");
  }

  /** Resets the GPU's context after launches that ran past their limit or were stopped
   * (`why`), and throws METILE_ERROR_DEVICE saying so. */
  [[noreturn]] void reset_after(const std::string& why) {
    const std::string error =
        cat(why, "; a stopped or hung kernel leaves the GPU's context unusable, so the ", info_.label(),
            " device was reset: buffers, streams and events made before are gone");
    {
      std::lock_guard<std::mutex> lock(mu_);
      watched_.clear();  // their events die with the context
      used_streams_.clear();
      stale_streams_.insert(created_streams_.begin(), created_streams_.end());
      created_streams_.clear();
      // Resetting the primary context tears down the running kernel, every allocation, module,
      // stream and event in it; what metile still holds is marked stale by the generation.
      generation_.fetch_add(1, std::memory_order_acq_rel);
      // A trapped kernel's sticky error can come back from the reset or from the first retain
      // after it while the old context is torn down (seen on an H100: the retain returned
      // CUDA_ERROR_LAUNCH_FAILED); the pair is asked again, a few times, before giving up.
      d_->cuCtxSetCurrent(nullptr);  // this thread no longer names the broken context
      CUresult reset = 0, retain = 0;
      for (int attempt = 0; attempt < 4; ++attempt) {
        if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
        reset = d_->cuDevicePrimaryCtxReset(dev_);
        if (reset == 0 && (retain = d_->cuDevicePrimaryCtxRetain(&ctx_, dev_)) == 0) break;
      }
      check(reset, "cuDevicePrimaryCtxReset (resetting the GPU after a stopped launch)");
      check(retain, "cuDevicePrimaryCtxRetain (after a reset)");
      name_context(ctx_, info_.label());
      check(d_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent (after a reset)");
      check(d_->cuStreamCreate(&stream_, 0), "cuStreamCreate (after a reset)");
      map_words();
      release_word(word_);  // no kernel runs any more
      for (int w : retired_words_) release_word(w);
      retired_words_.clear();
      word_ = take_word();
    }
    fail(METILE_ERROR_DEVICE, "cuda", error);
  }

  uint64_t create_stream() override {
    make_current();
    CUstream s = nullptr;
    check(d_->cuStreamCreate(&s, kStreamNonBlocking), "cuStreamCreate");
    std::lock_guard<std::mutex> lock(mu_);
    created_streams_.insert(s);
    return reinterpret_cast<uint64_t>(s);
  }

  void destroy_stream(uint64_t stream) override {
    CUstream s = as_stream(stream);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stale_streams_.erase(s) != 0) return;  // the reset destroyed it
      if (created_streams_.erase(s) == 0)
        fail(METILE_ERROR_INVALID_ARGUMENT, "cuda", "stream ", stream, " is not one this ",
             info_.label(), " device created (or it was destroyed already)");
      used_streams_.erase(s);
    }
    make_current();
    check(d_->cuStreamDestroy(s), "cuStreamDestroy");
  }

  std::unique_ptr<Event> create_event() override;

  /** The stream a launch with `options` queues on; noted so synchronize() waits for it. */
  CUstream launch_stream(const LaunchOptions& options) {
    if (options.stream == 0) return stream_;
    CUstream s = as_stream(options.stream);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stale_streams_.count(s) != 0) gone("this stream", info_.label());
    }
    check_owner(options.stream);
    std::lock_guard<std::mutex> lock(mu_);
    used_streams_.insert(s);
    return s;
  }

  /**
   * Refuses a stream of another GPU by name: the driver would answer only "invalid handle", or
   * queue nothing in order. 1 and 2 (the legacy and per-thread default streams) are every
   * context's own.
   */
  void check_owner(uint64_t stream) {
    if (stream <= 2 || d_->cuStreamGetCtx == nullptr) return;
    CUcontext owner = nullptr;
    if (CUresult r = d_->cuStreamGetCtx(as_stream(stream), &owner); r != 0) {
      const char* name = "?";
      d_->cuGetErrorName(r, &name);
      fail(METILE_ERROR_INVALID_ARGUMENT, "cuda", "stream ", stream_text(stream),
           " is not a live CUDA stream (cuStreamGetCtx: ", name, "); this launch or event is on ",
           info_.label());
    }
    if (owner == ctx_) return;
    std::string label = "a context other than a GPU's primary one";
    {
      std::lock_guard<std::mutex> lock(g_contexts_mu);
      if (auto it = g_context_labels.find(owner); it != g_context_labels.end()) label = it->second;
    }
    fail(METILE_ERROR_INVALID_ARGUMENT, "cuda", "stream ", stream_text(stream), " belongs to ", label,
         ", but this launch or event is on ", info_.label(), ": use one of ", info_.label(), "'s streams");
  }

  void wait_for_stream(uint64_t stream) override { order(as_stream(stream), stream_); }
  void signal_stream(uint64_t stream) override { order(stream_, as_stream(stream)); }
  uint64_t stream() const override { return reinterpret_cast<uint64_t>(stream_); }

  static CUstream as_stream(uint64_t s) { return reinterpret_cast<CUstream>(s); }

  /** Work queued on `then` from now on waits for the work queued on `first` so far. */
  void order(CUstream first, CUstream then) {
    if (first == then) return;
    make_current();
    CUevent e = nullptr;
    check(d_->cuEventCreate(&e, kEventDisableTiming), "cuEventCreate");
    CUresult r = d_->cuEventRecord(e, first);
    if (r == 0) r = d_->cuStreamWaitEvent(then, e, 0);
    d_->cuEventDestroy(e);  // released once the wait no longer needs it
    check(r, "ordering two CUDA streams (cuEventRecord/cuStreamWaitEvent)");
  }

  Artifact build(const Program& program, const CompileOptions& options) override {
    return cuda_build_program(program, options, info_.architecture, info_.threadgroup_memory_bytes, wgmma_);
  }

  std::shared_ptr<Kernel> load(std::shared_ptr<const Program> program, const CompileOptions&,
                               const Artifact& artifact) override;

  /** Before a launch: moves managed memory this device allocated back to the GPU when the host
   * may have touched it. Any other buffer (a DLPack import of torch's memory, a host wrap) is
   * left alone: prefetching memory the driver does not manage is an error. */
  void prefetch(Buffer* arg, CUstream stream) {
    auto* b = dynamic_cast<CudaBuffer*>(arg->underlying());
    if (b != nullptr && !b->live()) gone("a buffer passed to a launch", info_.label());
    if (b == nullptr || b->device != this || !b->owned() || !b->host_dirty) return;
    b->host_dirty = false;
    CUresult r = 0;
    if (d_->cuMemPrefetchAsync_v2)
      r = d_->cuMemPrefetchAsync_v2(b->device_address(), b->size(), CUmemLocation{1, dev_}, 0, stream);
    else if (d_->cuMemPrefetchAsync)
      r = d_->cuMemPrefetchAsync(b->device_address(), b->size(), dev_, stream);
    if (r != 0) failed(r, "cuMemPrefetchAsync");  // an earlier launch stopped: the reset, and why
  }

  const Driver* d_ = nullptr;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  bool pageable_ = false;
  bool wgmma_ = true;  // cuda_wgmma_enabled() when the device opened
  DeviceInfo info_;
  std::string identity_;
  std::atomic<uint64_t> generation_{1};
  host::CancelWords words_;
  CUdeviceptr words_device_ = 0;  // words_.memory() in the GPU's address space (this generation)
  CUdeviceptr words_copy_ = 0;    // their copy in GPU memory, which kernels read (map_words)
  CUstream copy_stream_ = nullptr;  // copies to words_copy_ go on it
  std::mutex mu_;  // guards the eight below
  int word_ = -1;                   // the stop word launches get
  std::vector<int> retired_words_;  // set by a cancel; kernels launched before may still read them
  std::set<int> reported_words_;    // their kernels' stops were reported (stopped_early)
  std::string last_kernel_;         // named by a cancel's error
  std::vector<Watched> watched_;
  std::set<CUstream> used_streams_;     // launched on since the last synchronize()
  std::set<CUstream> created_streams_;  // by create_stream(), not yet destroyed
  std::set<CUstream> stale_streams_;    // created before a reset, gone with it
};

void StopForwarder::run(int fd) {
  char notices[64];
  for (;;) {
    ssize_t n = read(fd, notices, sizeof notices);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    for (CudaDevice* d : devices_) {
      try {
        d->copy_stops();
      } catch (const std::exception&) {  // a failed context: the device's next wait reports it
      }
    }
  }
}

CudaBuffer::~CudaBuffer() {
  if (owned_ && live()) d_->cuMemFree(ptr_);
}

bool CudaBuffer::live() const {
  return generation_ == 0 || device == nullptr ||
         static_cast<CudaDevice*>(device)->generation() == generation_;
}

void* CudaBuffer::contents() {
  if (!live()) gone("this buffer", static_cast<CudaDevice*>(device)->info().label());
  // The host may touch the pages from now on: prefetch them back before the next launch.
  host_dirty = true;
  return owned_ ? reinterpret_cast<void*>(ptr_) : host_;
}

/** A CUevent with timing; waiting on it is watched like synchronize(). */
class CudaEvent : public Event {
 public:
  explicit CudaEvent(CudaDevice& dev) : dev_(dev), generation_(dev.generation()) {
    dev_.make_current();
    check(dev_.d_->cuEventCreate(&e_, 0), "cuEventCreate");
  }
  ~CudaEvent() override {
    if (live()) dev_.d_->cuEventDestroy(e_);
  }
  void record(uint64_t stream) override {
    check_live();
    dev_.make_current();
    LaunchOptions on;
    on.stream = stream;
    check(dev_.d_->cuEventRecord(e_, dev_.launch_stream(on)), "cuEventRecord");
    recorded_ = true;
  }
  void synchronize() override {
    check_live();
    if (!recorded_) return;
    dev_.make_current();
    dev_.wait([&] { return dev_.d_->cuEventQuery(e_); },
              [&] { return dev_.d_->cuEventSynchronize(e_); }, "cuEventSynchronize");
  }
  double elapsed_ms_since(Event& start) override {
    auto* s = dynamic_cast<CudaEvent*>(&start);
    if (s == nullptr || &s->dev_ != &dev_)
      fail(METILE_ERROR_INVALID_ARGUMENT, "event", "the two events belong to different devices");
    check_live();
    s->check_live();
    if (!recorded_ || !s->recorded_)
      fail(METILE_ERROR_INVALID_ARGUMENT, "event",
           "elapsed time needs both events recorded (metile_event_record)");
    synchronize();
    s->synchronize();
    float ms = 0;
    check(dev_.d_->cuEventElapsedTime(&ms, s->e_, e_), "cuEventElapsedTime");
    return ms;
  }

 private:
  bool live() const { return dev_.generation() == generation_; }
  void check_live() const {
    if (!live()) gone("this event", dev_.info().label());
  }
  CudaDevice& dev_;
  uint64_t generation_;
  CUevent e_ = nullptr;
  bool recorded_ = false;
};

std::unique_ptr<Event> CudaDevice::create_event() { return std::make_unique<CudaEvent>(*this); }

class CudaKernel;

class CudaLaunch : public PreparedLaunch {
 public:
  CudaLaunch(std::shared_ptr<const CudaKernel> k) : k_(std::move(k)) {}
  void update() override;
  void run() override;

 private:
  struct alignas(64) TensorMap {
    uint64_t opaque[16];
  };
  std::shared_ptr<const CudaKernel> k_;
  const CudaKernel* run_ = nullptr;  // k_, or its build without TMA when a tensor breaks TMA's rules
  std::vector<uint64_t> storage_;
  std::vector<TensorMap> maps_;
  std::vector<void*> params_;
  CUdeviceptr word_ = 0;       // the stop word's GPU address, set at each run
  CUdeviceptr word_copy_ = 0;  // its copy's (CudaDevice::map_words)
  /** The tensor maps of k_ for these arguments; false when TMA cannot read one of them. */
  bool encode_maps();
};

class CudaKernel : public Kernel, public std::enable_shared_from_this<CudaKernel> {
 public:
  CudaKernel(CudaDevice* dev, std::shared_ptr<const Program> program, const Artifact& a,
             const CompileOptions& options)
      : dev_(dev), program_(std::move(program)), options_(options), threads_(a.threads_per_group),
        smem_(a.threadgroup_memory_bytes) {
    if (auto m = a.sources.find(Stage::cuda_tensor_maps); m != a.sources.end() && !parse_tma_maps(m->second, &maps_))
      fail(METILE_ERROR_INTERNAL, "cuda", "malformed tensor maps in the artifact of ", program_->name);
    cubin_.assign(a.bytes.begin(), a.bytes.end());
    // The emitter names the kernel after the program unless that name is taken in CUDA C++.
    entry_ = a.entry.empty() ? program_->name : a.entry;
    load_module();
  }
  int registers_per_thread() const override { return registers_; }
  ~CudaKernel() override {
    if (module_ && generation_ == dev_->generation()) dev_->d_->cuModuleUnload(module_);
  }

  /** The function to launch, loaded again into the context after a reset. */
  CUfunction function() const {
    std::lock_guard<std::mutex> lock(module_mutex_);
    if (generation_ != dev_->generation()) load_module();
    return fn_;
  }

  /** Loads the cubin into the device's context (module_mutex_ held, or in the constructor). */
  void load_module() const {
    dev_->make_current();
    const Driver* d = dev_->d_;
    generation_ = dev_->generation();
    module_ = nullptr;
    fn_ = nullptr;
    check(d->cuModuleLoadData(&module_, cubin_.data()), "cuModuleLoadData");
    check(d->cuModuleGetFunction(&fn_, module_, entry_.c_str()), "cuModuleGetFunction");
    if (smem_ > 48 * 1024) {
      if (smem_ > dev_->info().threadgroup_memory_bytes)
        fail(METILE_ERROR_UNSUPPORTED, "cuda", "kernel ", entry_, " needs ", smem_,
             " bytes of shared memory; the device allows ", dev_->info().threadgroup_memory_bytes);
      check(d->cuFuncSetAttribute(fn_, kFuncAttrMaxDynamicShared, static_cast<int>(smem_)),
            "cuFuncSetAttribute(max dynamic shared memory)");
    }
    check(d->cuFuncGetAttribute(&registers_, kFuncAttrNumRegs, fn_),
          "cuFuncGetAttribute(registers per thread)");
  }

  std::unique_ptr<PreparedLaunch> prepare(const Grid& grid, std::vector<LaunchArg> args) override {
    auto l = std::make_unique<CudaLaunch>(shared_from_this());
    l->grid = grid;
    l->args = std::move(args);
    l->update();
    return l;
  }

  /** The same program built with TMA off (METILE_GPU_OFF's "tma"), built at its first use. */
  const CudaKernel& without_tma() const {
    std::lock_guard<std::mutex> lock(fallback_mutex_);
    if (!fallback_) {
      CompileOptions o = options_;
      if (!o.disables("tma")) o.disabled_passes.push_back("tma");
      fallback_ = std::make_shared<CudaKernel>(dev_, program_, dev_->build(*program_, o), o);
    }
    return *fallback_;
  }

  CudaDevice* dev_;
  std::shared_ptr<const Program> program_;
  CompileOptions options_;
  std::vector<TmaMap> maps_;  // the TMA tensor maps the kernel takes after its parameters
  mutable std::mutex fallback_mutex_;
  mutable std::shared_ptr<CudaKernel> fallback_;
  std::string cubin_;
  std::string entry_;
  mutable std::mutex module_mutex_;
  mutable uint64_t generation_ = 0;  // the device's when the module was loaded
  mutable CUmodule module_ = nullptr;
  mutable CUfunction fn_ = nullptr;
  int threads_;
  uint64_t smem_;
  mutable int registers_ = 0;
};

void CudaLaunch::update() {
  const Program& p = *k_->program_;
  storage_.assign(args.size(), 0);
  params_.assign(args.size(), nullptr);
  for (size_t i = 0; i < args.size(); ++i) {
    const Type& t = p.type(p.params[i].value);
    // Scalars sit in the low bytes of a 64-bit slot: the driver copies the parameter's size.
    storage_[i] = t.is_ptr ? args[i].buffer->device_address() + args[i].offset : args[i].bits;
    params_[i] = &storage_[i];
  }
  run_ = k_.get();
  if (!k_->maps_.empty()) {
    if (encode_maps()) {
      for (TensorMap& m : maps_) params_.push_back(&m);
    } else {
      run_ = &k_->without_tma();
    }
  }
  // The stop word and its copy after every other parameter (the kernel's last two when it
  // checks them; else extras the driver never reads), then a null entry: the driver reads only
  // as many entries as the kernel has parameters, and the stand-in driver finds the two just
  // before it.
  params_.push_back(&word_);
  params_.push_back(&word_copy_);
  params_.push_back(nullptr);
}

bool CudaLaunch::encode_maps() {
  const Program& p = *k_->program_;
  const Driver* d = k_->dev_->d_;
  if (d->cuTensorMapEncodeTiled == nullptr) return false;
  auto param = [&](int64_t i) -> std::optional<int64_t> {
    if (i < 0 || static_cast<size_t>(i) >= args.size()) return std::nullopt;
    const Type& t = p.type(p.params[static_cast<size_t>(i)].value);
    const uint64_t bits = args[static_cast<size_t>(i)].bits;
    if (t.is_ptr) return std::nullopt;
    if (t.dtype == DType::i32) return static_cast<int64_t>(static_cast<int32_t>(bits));
    if (t.dtype == DType::u32) return static_cast<int64_t>(static_cast<uint32_t>(bits));
    if (t.dtype == DType::i64) return static_cast<int64_t>(bits);
    return std::nullopt;
  };
  maps_.assign(k_->maps_.size(), TensorMap{});
  for (size_t i = 0; i < maps_.size(); ++i) {
    const TmaMap& m = k_->maps_[i];
    if (m.param < 0 || static_cast<size_t>(m.param) >= storage_.size()) return false;
    std::string why;
    const LaunchArg& a = args[static_cast<size_t>(m.param)];
    if (a.buffer == nullptr || a.offset > a.buffer->size()) return false;
    std::optional<TmaEncoding> e =
        tma_encoding(m, storage_[static_cast<size_t>(m.param)], a.buffer->size() - a.offset, param, &why);
    if (!e) return false;
    const uint32_t unit[3] = {1, 1, 1};
    if (d->cuTensorMapEncodeTiled(&maps_[i], e->data_type, e->rank, reinterpret_cast<void*>(e->base), e->dims,
                                  e->stride, e->box, unit, 0, e->swizzle, 2, 0) != 0)
      return false;  // a limit of this driver's: the kernel without TMA reads the tensor
  }
  return true;
}

void CudaLaunch::run() {
  CudaDevice* dev = k_->dev_;
  dev->make_current();
  CUstream stream = dev->launch_stream(options);
  // prefetch() dispatches on the buffer's real kind: a DLPack import wraps device memory it
  // does not own, and only the device's own (managed) buffers are prefetched.
  for (const LaunchArg& a : args)
    if (a.buffer) dev->prefetch(a.buffer, stream);
  CudaDevice::LaunchWord w = dev->launch_word(k_->program_->name);
  word_ = w.host;
  word_copy_ = w.copy;
  CUresult r = dev->d_->cuLaunchKernel(run_->function(), grid.dims[0], grid.dims[1], grid.dims[2],
                                       static_cast<unsigned>(run_->threads_), 1, 1,
                                       static_cast<unsigned>(run_->smem_), stream, params_.data(), nullptr);
  if (r != 0) dev->failed(r, "cuLaunchKernel");  // an earlier launch stopped: the reset, and why
  // Its limit is enforced while the host waits for it (CudaDevice::wait).
  host::LaunchLimit limit = host::current_launch_limit();
  if (limit.seconds > 0) dev->watch(stream, limit, k_->program_->name);
}

std::shared_ptr<Kernel> CudaDevice::load(std::shared_ptr<const Program> program,
                                         const CompileOptions& options, const Artifact& artifact) {
  if (artifact.kind != ArtifactKind::cubin)
    fail(METILE_ERROR_INTERNAL, "cuda", "cannot load a ", artifact_kind_name(artifact.kind), " artifact");
  return std::make_shared<CudaKernel>(this, std::move(program), artifact, options);
}

}  // namespace

std::string probe_cuda_device() {
  std::string why;
  if (load_driver(&why) == nullptr) return why;
  if (load_nvrtc(&why) == nullptr) return why;
  return {};
}

std::shared_ptr<Device> make_cuda_device() { return std::make_shared<CudaDevice>(0); }

std::shared_ptr<Device> make_cuda_device_nth(int ordinal) {
  std::string why;
  if (load_driver(&why) == nullptr) fail(METILE_ERROR_DEVICE_UNAVAILABLE, "cuda", "cuda:", ordinal, " is unavailable: ", why);
  return std::make_shared<CudaDevice>(ordinal);
}

int cuda_device_count() {
  const Driver* d = load_driver(nullptr);
  int count = 0;
  if (d != nullptr) check(d->cuDeviceGetCount(&count), "cuDeviceGetCount");
  return count;
}

bool cuda_wgmma_enabled() { return env_string("METILE_CUDA_WGMMA") != "0"; }

Artifact cuda_build_program(const Program& program, const CompileOptions& options,
                            const std::string& arch, uint64_t shared_memory_limit, bool wgmma) {
  GpuTarget target = nvidia_gpu_target(arch);
  if (shared_memory_limit != 0) target.threadgroup_memory_bytes = shared_memory_limit;
  if (!wgmma) target.warpgroup_atoms.clear();
  GpuPipelineResult gpu = run_gpu_pipeline(program, target, options, "cuda");
  CudaKernelSource src = emit_cuda(gpu.function);
  // wgmma exists only in the architecture-specific target (sm_90a), which runs on sm_90 alone.
  bool warpgroup = false;
  gpu::walk(gpu.function.body, [&](const gpu::Op& op) {
    warpgroup = warpgroup || (op.kind == gpu::GpuOpKind::MMA && mma_atom_kind(op) == AtomKind::wgmma);
  });
  const std::string compile_arch = warpgroup && arch.back() != 'a' ? arch + "a" : arch;
  Artifact a = cuda_build_from_source(
      {std::move(src.source), src.entry, src.threads_per_group, src.dynamic_shared_bytes, std::move(src.tensor_maps)},
      compile_arch);
  a.sources[Stage::layouts] = std::move(gpu.layouts);
  a.sources[Stage::gpu_ir] = std::move(gpu.gpu_ir);
  a.sources[Stage::gpu_ir_opt] = std::move(gpu.gpu_ir_opt);
  return a;
}

Artifact cuda_build_from_source(const CudaSource& src, const std::string& arch) {
  Artifact a;
  a.kind = ArtifactKind::cubin;
  std::string cubin = nvrtc_compile(src.text, src.entry, arch);
  a.bytes.assign(cubin.begin(), cubin.end());
  a.sources[Stage::cuda] = src.text;
  a.entry = src.entry;
  a.threads_per_group = src.threads_per_group;
  a.threadgroup_memory_bytes = src.dynamic_shared_bytes;
  if (!src.tensor_maps.empty()) a.sources[Stage::cuda_tensor_maps] = src.tensor_maps;
  return a;
}

}  // namespace metile
