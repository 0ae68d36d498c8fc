// The "metal" device (README.md "Devices"): Metal.framework through the Objective-C bridge
// (objc_bridge.h). Kernels are the MSL the GPU pipeline emits; launches are encoded into one
// command buffer each on the device's single queue and committed without waiting; synchronize()
// waits for every command buffer committed since the last one and turns a failure into a status.
// Metal cannot stop a committed command buffer, so a kernel stops itself: its loops check a stop
// word (host memory shared with the GPU, one word per launch) that the host sets when the
// launch's time limit passes during that wait or at once on metile_cancel_launches. A kernel
// that reaches no check runs on: past the limit the wait ends with the error.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "codegen/metal/msl.h"
#include "passes/pipeline.h"
#include "runtime/backends.h"
#include "runtime/device.h"
#include "runtime/host/cancel.h"
#include "runtime/host/cancel_words.h"
#include "runtime/metal/metal_toolchain.h"
#include "runtime/metal/objc_bridge.h"
#include "support/error.h"
#include "target/gpu_target.h"

namespace metile {

namespace {

using metal::AutoreleasePool;
using metal::id;
using metal::MTLSize;
using metal::NSInteger;
using metal::NSUInteger;
using metal::ObjcBool;
using metal::ObjcRuntime;
using metal::Sel;

constexpr size_t kMaxPackedWords = metal_sim::kMaxPackedBytes / 8;  // validate() checks the size
constexpr NSUInteger kStorageModeShared = 0;  // MTLResourceStorageModeShared (0 << 4)
constexpr NSUInteger kStatusCompleted = 4;    // MTLCommandBufferStatusCompleted
constexpr NSUInteger kStatusError = 5;        // MTLCommandBufferStatusError
constexpr NSUInteger kLanguageVersion4_0 = (4 << 16) + 0;  // MTLLanguageVersion4_0 (major << 16)
// How long a kernel asked to stop may take to reach a check of its stop word before the wait
// gives up on it (its loops check on their first turn and every 1024th; cuda waits as long).
constexpr auto kStopGrace = std::chrono::seconds(1);

// ---- the kernel interface ---------------------------------------------------------------------
// The two functions below are the only readers of the codegen's kernel-interface description
// (today metal_sim::MslSignature), so a change of that description is a change here only.

/** MSL source, its signature text and threads per threadgroup for a lowered GPU function. */
MslKernel kernel_source(const gpu::Function& f) { return emit_msl(f); }

/** How one signature entry is bound at launch. */
struct Binding {
  enum class Kind : uint8_t { buffer, scalar, packed, member, threadgroup, stop } kind;
  NSUInteger index;  // [[buffer(i)]] or [[threadgroup(i)]]; member: its offset in the struct
  NSUInteger bytes;  // scalar, member or packed struct size, or threadgroup memory length
                     // (a multiple of 16)
};

std::vector<Binding> bindings_of(const std::string& signature_text, std::string* kernel_name) {
  metal_sim::MslSignature sig = metal_sim::parse_signature(signature_text);
  *kernel_name = sig.kernel;
  std::vector<Binding> out;
  uint64_t packed_bytes = 0;
  const std::vector<uint64_t> offsets = sig.packed_layout(&packed_bytes);
  for (size_t i = 0; i < sig.args.size(); ++i) {
    const metal_sim::MslArg& a = sig.args[i];
    auto index = static_cast<NSUInteger>(a.binding);
    switch (a.kind) {
      case metal_sim::MslArg::Kind::packed:
        out.push_back({Binding::Kind::packed, index, static_cast<NSUInteger>(packed_bytes)});
        break;
      case metal_sim::MslArg::Kind::member:
        out.push_back({Binding::Kind::member, static_cast<NSUInteger>(offsets[i]), dtype_size(a.dtype)});
        break;
      case metal_sim::MslArg::Kind::buffer: out.push_back({Binding::Kind::buffer, index, 0}); break;
      case metal_sim::MslArg::Kind::stop: out.push_back({Binding::Kind::stop, index, 0}); break;
      case metal_sim::MslArg::Kind::scalar:
        out.push_back({Binding::Kind::scalar, index, dtype_size(a.dtype)});
        break;
      case metal_sim::MslArg::Kind::threadgroup:
        out.push_back({Binding::Kind::threadgroup, index, (a.count * dtype_size(a.dtype) + 15) / 16 * 16});
        break;
      case metal_sim::MslArg::Kind::builtin: break;
    }
  }
  return out;
}

// ---- buffers ------------------------------------------------------------------------------------

class MetalBuffer final : public Buffer {
 public:
  MetalBuffer(const ObjcRuntime& rt, id buffer, size_t size, bool shares)
      : rt_(rt), buffer_(buffer), size_(size), shares_(shares),
        contents_(rt.send<void*>(Sel::contents, buffer)) {}
  ~MetalBuffer() override { rt_.release(buffer_); }
  void* contents() override { return contents_; }
  size_t size() const override { return size_; }
  bool shares_memory() const override { return shares_; }
  id handle() const { return buffer_; }

 private:
  const ObjcRuntime& rt_;
  id buffer_;
  size_t size_;
  bool shares_;
  void* contents_;
};

// ---- the device ---------------------------------------------------------------------------------

/** MTLGPUFamily values (NSInteger), newest first. */
struct Family {
  NSInteger value;
  const char* name;
};
constexpr Family kAppleFamilies[] = {{1010, "apple10"}, {1009, "apple9"}, {1008, "apple8"},
                                     {1007, "apple7"},  {1006, "apple6"}, {1005, "apple5"}};
constexpr NSInteger kFamilyMetal3 = 5001, kFamilyMetal4 = 5002;

class MetalDevice final : public Device {
 public:
  explicit MetalDevice(const ObjcRuntime& rt) : rt_(rt) {
    AutoreleasePool pool(rt_);
    device_ = rt_.create_system_default_device();
    if (device_ == nullptr)
      fail(METILE_ERROR_DEVICE_UNAVAILABLE, "metal", "MTLCreateSystemDefaultDevice found no GPU");
    queue_ = rt_.send<id>(Sel::newCommandQueue, device_);
    if (queue_ == nullptr) fail(METILE_ERROR_DEVICE, "metal", "newCommandQueue returned nil");
    // The stop words, shared without a copy: the GPU reads what the host writes while it runs.
    words_buffer_ = rt_.send<id>(Sel::newBufferWithBytesNoCopy, device_, words_.memory(),
                                 static_cast<NSUInteger>(host::CancelWords::kBytes), kStorageModeShared,
                                 id{nullptr});
    if (words_buffer_ == nullptr)
      fail(METILE_ERROR_DEVICE, "metal", "newBufferWithBytesNoCopy refused the launches' stop words");
    std::string family = "apple";
    for (const Family& f : kAppleFamilies)
      if (rt_.send<ObjcBool>(Sel::supportsFamily, device_, f.value)) {
        family = f.name;
        break;
      }
    bool metal4 = rt_.send<ObjcBool>(Sel::supportsFamily, device_, kFamilyMetal4);
    bool metal3 = rt_.send<ObjcBool>(Sel::supportsFamily, device_, kFamilyMetal3);
    MTLSize max_threads = rt_.send<MTLSize>(Sel::maxThreadsPerThreadgroup, device_);
    NSUInteger tg_memory = rt_.send<NSUInteger>(Sel::maxThreadgroupMemoryLength, device_);

    // The GPU pipeline's target: Apple's description narrowed to what this GPU reports; its
    // family and Metal 4 decide whether dot lowers to tensor_ops (apple9 on, with Metal 4).
    const int family_number = apple_family_from_name(family);
    target_ = apple_gpu_target(family_number > 0 ? family_number : kAppleDefaultFamily, metal4);
    target_.max_threads = static_cast<int>(std::min<NSUInteger>(max_threads.width, 1024));
    target_.threadgroup_memory_bytes = std::min<uint64_t>(tg_memory, target_.threadgroup_memory_bytes);

    const metal::MetalToolchain& tc = metal::metal_toolchain();
    info_.name = "metal";
    info_.description = cat(rt_.text(rt_.send<id>(Sel::name, device_)), " (",
                             metal4 ? "Metal 4" : metal3 ? "Metal 3" : "Metal", ", ",
                             tc.xcrun.empty() ? "runtime MSL compiler" : tc.version, ")");
    info_.architecture = family;
    info_.simd_width = target_.simd_width;
    info_.max_threads_per_group = target_.max_threads;
    info_.threadgroup_memory_bytes = target_.threadgroup_memory_bytes;
    info_.unified_memory = true;
    info_.asynchronous = true;
    identity_ = cat("metal;", family, ";", info_.description, ";",
                    tc.xcrun.empty() ? "newLibraryWithSource" : "metallib");
  }

  ~MetalDevice() override {
    try {
      synchronize();
    } catch (const Error&) {
      // an unreported kernel failure at exit has no one left to tell
    }
    rt_.release(words_buffer_);
    rt_.release(queue_);
    rt_.release(device_);
  }

  const DeviceInfo& info() const override { return info_; }
  std::string cache_identity() const override { return identity_; }

  // Every entry point that sends messages runs inside its own autorelease pool: Metal may
  // autorelease internally, and a thread of the caller's has no pool of its own.
  std::shared_ptr<Buffer> alloc(size_t bytes) override {
    AutoreleasePool pool(rt_);
    id b = rt_.send<id>(Sel::newBufferWithLength, device_,
                        static_cast<NSUInteger>(std::max<size_t>(bytes, 1)), kStorageModeShared);
    if (b == nullptr)
      fail(METILE_ERROR_OUT_OF_MEMORY, "metal", "cannot allocate a buffer of ", bytes, " bytes");
    auto buf = std::make_shared<MetalBuffer>(rt_, b, bytes, false);
    std::memset(buf->contents(), 0, std::max<size_t>(bytes, 1));
    buf->device = this;
    return buf;
  }

  /**
   * Zero-copy (newBufferWithBytesNoCopy) when `host` and `bytes` are page-aligned, as Metal
   * requires; otherwise a new shared buffer holding a copy, which shares_memory() reports.
   */
  std::shared_ptr<Buffer> wrap(void* host, size_t bytes) override {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    AutoreleasePool pool(rt_);
    if (bytes > 0 && reinterpret_cast<uintptr_t>(host) % page == 0 && bytes % page == 0) {
      id b = rt_.send<id>(Sel::newBufferWithBytesNoCopy, device_, host,
                          static_cast<NSUInteger>(bytes), kStorageModeShared, id{nullptr});
      if (b != nullptr) {
        auto buf = std::make_shared<MetalBuffer>(rt_, b, bytes, true);
        buf->device = this;
        return buf;
      }
    }
    std::shared_ptr<Buffer> buf = alloc(bytes);
    if (bytes > 0) std::memcpy(buf->contents(), host, bytes);
    return buf;
  }

  void synchronize() override {
    std::deque<Pending> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done.swap(pending_);
    }
    std::string error = take_deferred_error();
    AutoreleasePool pool(rt_);
    while (!done.empty()) {
      Pending& p = done.front();
      if (!wait_within_limit(p)) {
        // It and the command buffers queued behind it stay pending: the next synchronize waits
        // for them in full, so no later wait returns while the kernel may still write.
        error = cat(p.stop.reason(p.kernel),
                    p.word < 0 ? "; it has no loop that checks a stop word"
                               : cat("; it was asked to stop and reached no check of its stop word within ",
                                     std::chrono::duration<double>(kStopGrace).count(), " s"),
                    ", and Metal cannot stop a committed command buffer, so the kernel runs on and the "
                    "next synchronize of the metal device waits for it",
                    error.empty() ? "" : "; before it: ", error);
        p.limited = false;
        p.reported = true;
        std::lock_guard<std::mutex> lock(mu_);
        pending_.insert(pending_.begin(), done.begin(), done.end());
        break;
      }
      std::string why = failure_of(p);
      if (error.empty()) error = why;
      finished(p);
      done.pop_front();
    }
    if (!error.empty()) fail(METILE_ERROR_DEVICE, "metal", error);
  }

  Artifact build(const Program& program, const CompileOptions& options) override {
    GpuPipelineResult gpu = run_gpu_pipeline(program, target_, options, "metal");
    MslKernel k = kernel_source(gpu.function);
    Artifact a;
    const metal::MetalToolchain& tc = metal::metal_toolchain();
    if (tc.xcrun.empty()) {
      a.kind = ArtifactKind::msl;  // compiled by load() with newLibraryWithSource
    } else {
      a.kind = ArtifactKind::metallib;
      a.bytes = metal::build_metallib(tc, k.source, k.signature.kernel, k.language);
    }
    if (!k.language.empty()) a.sources[Stage::msl_language] = k.language;
    a.entry = k.signature.kernel;
    a.sources[Stage::msl] = std::move(k.source);
    a.sources[Stage::msl_signature] = metal_sim::print_signature(k.signature);
    a.sources[Stage::layouts] = std::move(gpu.layouts);
    a.sources[Stage::gpu_ir] = std::move(gpu.gpu_ir);
    a.sources[Stage::gpu_ir_opt] = std::move(gpu.gpu_ir_opt);
    a.threads_per_group = k.threads_per_group;
    a.threadgroup_memory_bytes = k.signature.threadgroup_arg_bytes();
    return a;
  }

  std::shared_ptr<Kernel> load(std::shared_ptr<const Program>, const CompileOptions&,
                               const Artifact& artifact) override;

  /**
   * A stop word for a launch about to be encoded: in use (metile_cancel_launches sets it) until
   * its command buffer is reaped. With every word taken by launches in flight (thousands; Metal
   * queues far fewer command buffers), it waits for the oldest.
   */
  int take_word() {
    for (;;) {
      int w = words_.take();
      if (w >= 0) return w;
      std::unique_lock<std::mutex> lock(mu_);
      if (pending_.empty()) continue;  // another thread reaped one
      Pending p = pending_.front();
      pending_.pop_front();
      lock.unlock();
      AutoreleasePool pool(rt_);
      rt_.send(Sel::waitUntilCompleted, p.command_buffer);
      std::string why = failure_of(p);
      finished(p);
      lock.lock();
      if (deferred_error_.empty()) deferred_error_ = why;
    }
  }
  id words_buffer() const { return words_buffer_; }
  static NSUInteger word_offset(int word) { return static_cast<NSUInteger>(host::CancelWords::offset(word)); }

  /** Commits an encoded command buffer (retained by the caller) and remembers it; `word`: its
   * stop word (-1: the kernel has no checks). */
  void committed(id command_buffer, const std::string& kernel, int word) {
    host::LaunchStop stop;  // the launch's limit (METILE_TIMEOUT_S, its own) counts from now
    bool limited = stop.limited();
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({command_buffer, kernel, stop, limited, word});
    // Finished command buffers are released as launches go, so a program that never
    // synchronizes holds only the ones still in flight; a failure waits for synchronize().
    while (pending_.size() > 16) {
      Pending& p = pending_.front();
      NSUInteger s = rt_.send<NSUInteger>(Sel::status, p.command_buffer);
      if (s != kStatusCompleted && s != kStatusError) break;
      std::string why = failure_of(p);
      if (deferred_error_.empty()) deferred_error_ = why;
      finished(p);
      pending_.pop_front();
    }
  }

  const ObjcRuntime& rt_;
  id device_ = nullptr;
  id queue_ = nullptr;

 private:
  struct Pending {
    id command_buffer;
    std::string kernel;
    host::LaunchStop stop;
    bool limited;  // synchronize() polls it against stop's deadline; cleared once reported
    int word;      // its stop word, -1 without
    bool asked = false;     // the wait set the word (its time limit passed)
    bool reported = false;  // its wait failed already: the launch has had its error
  };

  /** Reaps a finished launch: its command buffer and its stop word. */
  void finished(const Pending& p) {
    rt_.release(p.command_buffer);
    if (p.word >= 0) words_.release(p.word);
  }

  /** Why a launch that completed counts as failed: the kernel stopped at a check of its word
   * (its outputs are then partly written), or its limit passed before it ended. */
  std::string stop_failure(const Pending& p) const {
    if (p.reported) return {};
    if (p.word >= 0 && words_.get(p.word) == host::kWordStopped)
      return cat(p.stop.reason(p.kernel), " and was stopped; its outputs are partly written");
    if (p.asked) return cat(p.stop.reason(p.kernel), "; it ended before it reached a check");
    return {};
  }

  std::string failure_of(const Pending& p) const {
    if (std::string why = stop_failure(p); !why.empty()) return why;
    if (rt_.send<NSUInteger>(Sel::status, p.command_buffer) != kStatusError) return {};
    AutoreleasePool pool(rt_);
    std::string why = rt_.describe(rt_.send<id>(Sel::error, p.command_buffer));
    return cat("kernel ", p.kernel, " failed: ", why.empty() ? "no error description" : why);
  }

  /**
   * Waits for `p`'s command buffer. Past its launch's time limit (or on a cancel while waiting
   * for a limited launch) it sets the launch's stop word and waits kStopGrace more for the
   * kernel to stop; false when it did not (or has no word). Without a limit the wait blocks in
   * Metal: a cancel sets the word from elsewhere.
   */
  bool wait_within_limit(Pending& p) {
    if (!p.limited) {
      rt_.send(Sel::waitUntilCompleted, p.command_buffer);
      return true;
    }
    // Polls back off to 0.5 ms, as cuda's do: a wait ends at most that late.
    auto pause = std::chrono::microseconds(20);
    std::chrono::steady_clock::time_point asked_at;
    for (;;) {
      NSUInteger s = rt_.send<NSUInteger>(Sel::status, p.command_buffer);
      if (s == kStatusCompleted || s == kStatusError) return true;
      if (!p.asked && p.stop.should_stop()) {
        if (p.word < 0) return false;
        words_.stop(p.word);
        p.asked = true;
        asked_at = std::chrono::steady_clock::now();
      } else if (p.asked && std::chrono::steady_clock::now() - asked_at >= kStopGrace) {
        return false;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(500));
    }
  }

  std::string take_deferred_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(deferred_error_, {});
  }

  host::CancelWords words_;   // the launches' stop words
  id words_buffer_ = nullptr;  // words_.memory() as an MTLBuffer
  GpuTarget target_;
  DeviceInfo info_;
  std::string identity_;
  std::mutex mu_;
  std::deque<Pending> pending_;
  std::string deferred_error_;
};

// ---- kernels and launches ---------------------------------------------------------------------

class MetalKernel final : public Kernel, public std::enable_shared_from_this<MetalKernel> {
 public:
  MetalKernel(MetalDevice* dev, const Artifact& a);
  ~MetalKernel() override { dev_->rt_.release(pipeline_); }
  std::unique_ptr<PreparedLaunch> prepare(const Grid& grid, std::vector<LaunchArg> args) override;
  void encode(const Grid& grid, const std::vector<LaunchArg>& args) const;

 private:
  MetalDevice* dev_;
  std::string name_;
  std::vector<Binding> bindings_;
  size_t launch_args_ = 0;
  NSUInteger threads_;
  id pipeline_ = nullptr;
};

class MetalLaunch final : public PreparedLaunch {
 public:
  explicit MetalLaunch(std::shared_ptr<const MetalKernel> k) : k_(std::move(k)) {}
  void run() override { k_->encode(grid, args); }

 private:
  std::shared_ptr<const MetalKernel> k_;
};

MetalKernel::MetalKernel(MetalDevice* dev, const Artifact& a)
    : dev_(dev), threads_(static_cast<NSUInteger>(a.threads_per_group)) {
  auto sig = a.sources.find(Stage::msl_signature);
  auto msl = a.sources.find(Stage::msl);
  if ((a.kind != ArtifactKind::msl && a.kind != ArtifactKind::metallib) || sig == a.sources.end() || msl == a.sources.end())
    fail(METILE_ERROR_INVALID_ARGUMENT, "metal", "the artifact is not a metal kernel (kind \"",
         artifact_kind_name(a.kind), "\")");
  bindings_ = bindings_of(sig->second, &name_);
  for (const Binding& b : bindings_)
    launch_args_ += b.kind == Binding::Kind::buffer || b.kind == Binding::Kind::scalar ||
                    b.kind == Binding::Kind::member;
  const ObjcRuntime& rt = dev_->rt_;
  AutoreleasePool pool(rt);
  id error = nullptr;
  id library = nullptr;
  if (a.kind == ArtifactKind::metallib) {
    metal::TempFile file(".metallib", a.bytes.data(), a.bytes.size());
    id path = rt.make_string(file.path());
    id url = rt.send<id>(Sel::fileURLWithPath, rt.get_class("NSURL"), path);  // autoreleased
    rt.release(path);
    library = rt.send<id>(Sel::newLibraryWithURL, dev_->device_, url, &error);
  } else {
    id source = rt.make_string(msl->second);
    id options = rt.send<id>(Sel::init, rt.send<id>(Sel::alloc, rt.get_class("MTLCompileOptions")));
    rt.send(Sel::setFastMathEnabled, options, ObjcBool{false});  // IEEE floats: docs/semantics.md
    // Without an explicit version the compiler picks one from the SDK the process was built
    // against, which may predate Metal 4 and its headers (tensor_ops kernels then fail).
    auto language = a.sources.find(Stage::msl_language);
    if (language != a.sources.end()) {
      if (language->second != "metal4.0")
        fail(METILE_ERROR_INVALID_ARGUMENT, "metal", name_, ": unknown MSL version \"", language->second, "\"");
      rt.send(Sel::setLanguageVersion, options, kLanguageVersion4_0);
    }
    library = rt.send<id>(Sel::newLibraryWithSource, dev_->device_, source, options, &error);
    rt.release(options);
    rt.release(source);
  }
  if (library == nullptr)
    fail(METILE_ERROR_COMPILE, "metal", name_, ": Metal rejected the kernel:\n", rt.describe(error));
  id fname = rt.make_string(name_);
  id function = rt.send<id>(Sel::newFunctionWithName, library, fname);
  rt.release(fname);
  rt.release(library);
  if (function == nullptr)
    fail(METILE_ERROR_COMPILE, "metal", "the library has no kernel function ", name_);
  error = nullptr;
  pipeline_ = rt.send<id>(Sel::newComputePipelineState, dev_->device_, function, &error);
  rt.release(function);
  if (pipeline_ == nullptr)
    fail(METILE_ERROR_COMPILE, "metal", name_, ": cannot create its compute pipeline: ",
         rt.describe(error));
  NSUInteger max = rt.send<NSUInteger>(Sel::maxTotalThreadsPerThreadgroup, pipeline_);
  if (threads_ < 1 || threads_ > max)
    fail(METILE_ERROR_UNSUPPORTED, "metal", name_, ": needs ", threads_,
         " threads per threadgroup, but its pipeline on this GPU allows at most ", max,
         " (compile with fewer num_threads)");
}

std::unique_ptr<PreparedLaunch> MetalKernel::prepare(const Grid& grid, std::vector<LaunchArg> args) {
  if (args.size() != launch_args_)
    fail(METILE_ERROR_INVALID_ARGUMENT, "metal", name_, ": ", args.size(),
         " launch arguments for ", launch_args_, " parameters");
  size_t next = 0;
  for (const Binding& b : bindings_) {
    if (b.kind == Binding::Kind::threadgroup || b.kind == Binding::Kind::packed ||
        b.kind == Binding::Kind::stop)
      continue;
    const LaunchArg& a = args[next++];
    bool is_buffer = b.kind == Binding::Kind::buffer;
    if (is_buffer != (a.buffer != nullptr))
      fail(METILE_ERROR_INVALID_ARGUMENT, "metal", name_, ": argument ", next - 1,
           is_buffer ? " needs a buffer" : " is a scalar, not a buffer");
    // Only this device's MetalBuffers (possibly behind a wrapper) carry an MTLBuffer.
    if (is_buffer && (a.buffer->device != dev_ || a.buffer->underlying()->device != dev_))
      fail(METILE_ERROR_INVALID_ARGUMENT, "metal", name_, ": argument ", next - 1,
           " is a buffer of another device");
  }
  auto l = std::make_unique<MetalLaunch>(shared_from_this());
  l->grid = grid;
  l->args = std::move(args);
  return l;
}

void MetalKernel::encode(const Grid& grid, const std::vector<LaunchArg>& args) const {
  const ObjcRuntime& rt = dev_->rt_;
  for (uint32_t d : grid.dims)
    if (d == 0) return;  // an empty grid runs nothing
  AutoreleasePool pool(rt);
  id cb = rt.send<id>(Sel::commandBuffer, dev_->queue_);  // autoreleased
  if (cb == nullptr) fail(METILE_ERROR_DEVICE, "metal", name_, ": commandBuffer returned nil");
  id enc = rt.send<id>(Sel::computeCommandEncoder, cb);  // autoreleased
  if (enc == nullptr)
    fail(METILE_ERROR_DEVICE, "metal", name_, ": computeCommandEncoder returned nil");
  rt.send(Sel::setComputePipelineState, enc, pipeline_);
  size_t next = 0;
  uint64_t packed[kMaxPackedWords] = {};  // the members, before setBytes copies them
  const Binding* pack = nullptr;
  int word = -1;
  for (const Binding& b : bindings_) {
    switch (b.kind) {
      case Binding::Kind::member:  // the value sits in the low bytes (little-endian)
        std::memcpy(reinterpret_cast<char*>(packed) + b.index, &args[next++].bits, b.bytes);
        break;
      case Binding::Kind::packed:
        pack = &b;
        break;
      case Binding::Kind::buffer: {
        const LaunchArg& a = args[next++];
        rt.send(Sel::setBuffer, enc, static_cast<MetalBuffer*>(a.buffer->underlying())->handle(),
                static_cast<NSUInteger>(a.offset), b.index);
        break;
      }
      case Binding::Kind::scalar: {
        const LaunchArg& a = args[next++];  // the value sits in the low bytes (little-endian)
        rt.send(Sel::setBytes, enc, static_cast<const void*>(&a.bits), b.bytes, b.index);
        break;
      }
      case Binding::Kind::threadgroup:
        rt.send(Sel::setThreadgroupMemoryLength, enc, b.bytes, b.index);
        break;
      case Binding::Kind::stop:
        word = dev_->take_word();
        rt.send(Sel::setBuffer, enc, dev_->words_buffer(), MetalDevice::word_offset(word), b.index);
        break;
    }
  }
  if (pack != nullptr) rt.send(Sel::setBytes, enc, static_cast<const void*>(packed), pack->bytes, pack->index);
  rt.send(Sel::dispatchThreadgroups, enc, MTLSize{grid.dims[0], grid.dims[1], grid.dims[2]},
          MTLSize{threads_, 1, 1});
  rt.send(Sel::endEncoding, enc);
  rt.send<id>(Sel::retain, cb);  // outlives the pool until synchronize()
  rt.send(Sel::commit, cb);
  dev_->committed(cb, name_, word);
}

std::shared_ptr<Kernel> MetalDevice::load(std::shared_ptr<const Program>, const CompileOptions&,
                                          const Artifact& artifact) {
  return std::make_shared<MetalKernel>(this, artifact);
}

}  // namespace

std::string probe_metal_device() {
  static std::once_flag once;
  static std::string why;
  std::call_once(once, [] {
    const ObjcRuntime* rt = ObjcRuntime::get(&why);
    if (rt == nullptr) return;
    AutoreleasePool pool(*rt);
    id device = rt->create_system_default_device();
    if (device == nullptr) why = "MTLCreateSystemDefaultDevice found no GPU";
    rt->release(device);
  });
  return why;
}

std::shared_ptr<Device> make_metal_device() {
  std::string why;
  const ObjcRuntime* rt = ObjcRuntime::get(&why);
  if (rt == nullptr) fail(METILE_ERROR_DEVICE_UNAVAILABLE, "metal", why);
  return std::make_shared<MetalDevice>(*rt);
}

}  // namespace metile
