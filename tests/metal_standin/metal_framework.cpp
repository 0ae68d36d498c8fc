// The stand-in Metal.framework (and the few Foundation classes the metal device uses), for
// proving the metal device on Linux. Every method is a C function with the prototype of Apple's
// header; the compute work runs on the metal-sim engine (src/runtime/metal_sim): the library's
// MSL is compiled by metal-sim's clang + shim, dispatches run on its fibers. Test-only.
//
// Like Metal, command buffers run asynchronously after commit, in queue order; a dispatch that
// Metal's validation would reject (threads over the pipeline's limit, a missing binding) or a
// kernel that fails puts its command buffer into MTLCommandBufferStatusError with an NSError.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <condition_variable>
#include <deque>
#include <thread>
#include <iterator>
#include <map>
#include <mutex>

#include "kernel_params.h"
#include "runtime/metal_sim/sim_kernel.h"
#include "standin_metal.h"
#include "standin_objc.h"
#include "support/error.h"

namespace metile {
class Cache;
Cache& global_cache();  // cache/cache.h (whose Device would clash with the stand-in's)
}  // namespace metile

namespace {

using namespace metile;
using id = void*;
using SEL = const void*;
using NSUInteger = unsigned long;
using NSInteger = long;
using BOOL = signed char;  // x86-64 macOS
struct MTLSize {
  NSUInteger width, height, depth;
};

std::atomic<NSUInteger> allocation_limit{0};
std::atomic<NSUInteger> pipeline_max_threads{1024};
std::atomic<long> rejected_no_copy{0};

template <class T>
T* make(const char* class_name) {
  T* o = new T();
  standin_objc_init_object(&o->header, static_cast<standin_class*>(objc_getClass(class_name)),
                           [](standin_object* p) { delete reinterpret_cast<T*>(p); });
  return o;
}
template <class T>
T* as(id o) {
  return reinterpret_cast<T*>(o);
}

// ---- Foundation: NSString, NSError, NSURL -------------------------------------------------------

struct NSString {
  standin_object header;
  std::string text;
};
NSString* new_string(std::string s) {
  NSString* o = make<NSString>("NSString");
  o->text = std::move(s);
  return o;
}
id string_alloc(id, SEL) { return make<NSString>("NSString"); }
id string_init_with_bytes(id self, SEL, const void* bytes, NSUInteger length, NSUInteger encoding) {
  if (encoding != 4) {  // only NSUTF8StringEncoding
    standin_objc_release(self);
    return nullptr;
  }
  as<NSString>(self)->text.assign(static_cast<const char*>(bytes), length);
  return self;
}
const char* string_utf8(id self, SEL) { return as<NSString>(self)->text.c_str(); }

struct NSError {
  standin_object header;
  NSInteger code = 0;
  NSString* description = nullptr;
  ~NSError() { standin_objc_release(description); }
};
NSError* new_error(NSInteger code, const std::string& text) {
  NSError* e = make<NSError>("NSError");
  e->code = code;
  e->description = new_string(text);
  return e;
}
id error_description(id self, SEL) {
  return standin_objc_autorelease(standin_objc_retain(as<NSError>(self)->description));
}
NSInteger error_code(id self, SEL) { return as<NSError>(self)->code; }
/** Stores an autoreleased error in an NSError** out-parameter, as Cocoa does. */
void set_error(id* out, NSInteger code, const std::string& text) {
  NSError* e = new_error(code, text);
  if (out != nullptr) *out = standin_objc_autorelease(e);
  else standin_objc_release(e);
}

struct NSURL {
  standin_object header;
  std::string path;
};
id url_file_url_with_path(id, SEL, id path) {
  NSURL* u = make<NSURL>("NSURL");
  u->path = as<NSString>(path)->text;
  return standin_objc_autorelease(u);
}

// MTLLanguageVersion: major << 16 | minor. Unset, the real compiler picks a version from the
// SDK the process was built against; the stand-in takes one that predates Metal 4.
constexpr NSUInteger kLanguageVersion3_2 = (3 << 16) + 2, kLanguageVersion4_0 = 4 << 16;

struct CompileOptions {
  standin_object header;
  BOOL fast_math = 1;  // Metal's default
  NSUInteger language = kLanguageVersion3_2;
};
id options_alloc(id, SEL) { return make<CompileOptions>("MTLCompileOptions"); }
void options_set_fast_math(id self, SEL, BOOL enabled) { as<CompileOptions>(self)->fast_math = enabled; }
void options_set_language_version(id self, SEL, NSUInteger v) { as<CompileOptions>(self)->language = v; }

// ---- MTLBuffer ---------------------------------------------------------------------------------

struct Buffer {
  standin_object header;
  void* data = nullptr;
  NSUInteger length = 0;
  bool owned = false;
  bool shared = true;  // MTLStorageModeShared: the CPU may address it
  ~Buffer() {
    if (owned) std::free(data);
  }
};
void* buffer_contents(id self, SEL) { return as<Buffer>(self)->shared ? as<Buffer>(self)->data : nullptr; }
NSUInteger buffer_length(id self, SEL) { return as<Buffer>(self)->length; }

// ---- MTLLibrary, MTLFunction, MTLComputePipelineState -----------------------------------------

struct CompiledKernel {
  metal_sim::MslSignature signature;  // threadgroup counts are placeholders
  std::vector<uint8_t> so;            // metal-sim's shared object
  std::mutex mu;
  std::map<std::vector<uint64_t>, metal_sim::SimKernel> loaded;  // by threadgroup element counts
};

struct Library {
  standin_object header;
  std::map<std::string, std::shared_ptr<CompiledKernel>> kernels;
};
struct Function {
  standin_object header;
  std::shared_ptr<CompiledKernel> kernel;
};
struct Pipeline {
  standin_object header;
  std::shared_ptr<CompiledKernel> kernel;
  NSUInteger max_threads = 1024;
};

id library_new_function(id self, SEL, id name) {
  auto& kernels = as<Library>(self)->kernels;
  auto it = kernels.find(as<NSString>(name)->text);
  if (it == kernels.end()) return nullptr;
  Function* f = make<Function>("StandinFunction");
  f->kernel = it->second;
  return f;
}
NSUInteger pipeline_max_total_threads(id self, SEL) { return as<Pipeline>(self)->max_threads; }

/** Compiles with metal-sim; Metal 4 headers exist only from MSL 4.0 on, as in Apple's compiler. */
Library* compile_library(const std::string& msl, NSUInteger language, id* error) {
  if (language < kLanguageVersion4_0 && msl.find("#include <metal_tensor>") != std::string::npos) {
    set_error(error, 3, "Compilation failed:\n\nprogram_source: error: 'metal_tensor' file not found "
                        "(Metal 4 headers need languageVersion 4.0)");
    return nullptr;
  }
  // Apple's compiler keeps the libraries it built; the stand-in keeps its shared objects where
  // metal-sim does (this module's static copy of the library installs its store on first use of
  // its cache), so it finds metal-sim's builds of the same MSL.
  static const bool store_installed = (metile::global_cache(), true);
  (void)store_installed;
  auto lib = make<Library>("StandinLibrary");
  try {
    for (metal_sim::MslSignature& sig : standin::kernel_signatures(msl)) {
      auto k = std::make_shared<CompiledKernel>();
      k->so = metal_sim::build_msl(msl, sig);
      k->signature = std::move(sig);
      lib->kernels[k->signature.kernel] = k;
    }
  } catch (const Error& e) {
    standin_objc_release(lib);
    set_error(error, 3 /* MTLLibraryErrorCompileFailure */, cat("Compilation failed:\n\n", e.what()));
    return nullptr;
  }
  return lib;
}

// ---- MTLCommandQueue, MTLCommandBuffer, MTLComputeCommandEncoder --------------------------------

struct Dispatch {
  std::shared_ptr<CompiledKernel> kernel;
  NSUInteger max_threads = 0;
  std::map<NSUInteger, std::pair<Buffer*, NSUInteger>> buffers;  // retained
  std::map<NSUInteger, std::vector<uint8_t>> bytes;
  std::map<NSUInteger, NSUInteger> threadgroup_lengths;
  MTLSize groups{}, threads{};
};

/** The queue's GPU: one thread running committed command buffers in order. */
struct QueueWorker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<struct CommandBuffer*> jobs;  // retained
  bool stop = false;
};

struct CommandQueue {
  standin_object header;
  std::shared_ptr<QueueWorker> worker;
  ~CommandQueue() {
    std::lock_guard<std::mutex> lock(worker->mu);
    worker->stop = true;
    worker->cv.notify_all();
  }
};

/** A command buffer's status, apart from it so the GPU thread can announce completion after
 *  dropping its reference (an object count taken after waitUntilCompleted is then exact). */
struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<NSUInteger> status{0};  // MTLCommandBufferStatusNotEnqueued
};

struct CommandBuffer {
  standin_object header;
  CommandQueue* queue = nullptr;  // retained
  std::vector<Dispatch> dispatches;
  std::shared_ptr<Completion> completion = std::make_shared<Completion>();
  NSError* error = nullptr;
  ~CommandBuffer() {
    for (Dispatch& d : dispatches)
      for (auto& [index, b] : d.buffers) standin_objc_release(b.first);
    standin_objc_release(error);
    standin_objc_release(queue);
  }
};

struct Encoder {
  standin_object header;
  CommandBuffer* command_buffer = nullptr;  // retained
  Pipeline* pipeline = nullptr;             // not retained: the dispatch keeps the kernel
  Dispatch current;
  ~Encoder() {
    for (auto& [index, b] : current.buffers) standin_objc_release(b.first);
    standin_objc_release(command_buffer);
  }
};

id queue_command_buffer(id self, SEL) {
  CommandBuffer* cb = make<CommandBuffer>("StandinCommandBuffer");
  cb->queue = static_cast<CommandQueue*>(standin_objc_retain(self));
  return standin_objc_autorelease(cb);
}

id command_buffer_compute_encoder(id self, SEL) {
  Encoder* e = make<Encoder>("StandinComputeCommandEncoder");
  e->command_buffer = static_cast<CommandBuffer*>(standin_objc_retain(self));
  return standin_objc_autorelease(e);
}

void encoder_set_pipeline(id self, SEL, id pipeline) { as<Encoder>(self)->pipeline = as<Pipeline>(pipeline); }
void encoder_set_buffer(id self, SEL, id buffer, NSUInteger offset, NSUInteger index) {
  auto& slot = as<Encoder>(self)->current.buffers[index];
  standin_objc_retain(buffer);
  standin_objc_release(slot.first);
  slot = {as<Buffer>(buffer), offset};
}
void encoder_set_bytes(id self, SEL, const void* bytes, NSUInteger length, NSUInteger index) {
  auto* p = static_cast<const uint8_t*>(bytes);
  as<Encoder>(self)->current.bytes[index].assign(p, p + length);
}
void encoder_set_threadgroup_memory(id self, SEL, NSUInteger length, NSUInteger index) {
  as<Encoder>(self)->current.threadgroup_lengths[index] = length;
}
void encoder_dispatch(id self, SEL, MTLSize groups, MTLSize threads) {
  Encoder* e = as<Encoder>(self);
  Dispatch d = e->current;  // bindings persist across dispatches, as in Metal
  for (auto& [index, b] : d.buffers) standin_objc_retain(b.first);
  d.kernel = e->pipeline ? e->pipeline->kernel : nullptr;
  d.max_threads = e->pipeline ? e->pipeline->max_threads : 0;
  d.groups = groups;
  d.threads = threads;
  e->command_buffer->dispatches.push_back(std::move(d));
}
void encoder_end(id, SEL) {}

/** Runs one dispatch; returns "" or what went wrong. */
std::string run(const Dispatch& d) {
  if (!d.kernel) return "dispatch without a compute pipeline state";
  const metal_sim::MslSignature& sig = d.kernel->signature;
  NSUInteger threads = d.threads.width * d.threads.height * d.threads.depth;
  if (threads > d.max_threads)
    return cat("threadsPerThreadgroup (", threads, ") exceeds the pipeline's maxTotalThreadsPerThreadgroup (",
               d.max_threads, ")");
  std::vector<uint64_t> counts;
  std::vector<metal_sim::SimArg> args;
  uint64_t packed_bytes = 0;
  const std::vector<uint64_t> offsets = sig.packed_layout(&packed_bytes);
  const std::vector<uint8_t>* packed = nullptr;  // the setBytes of the packed struct
  for (const metal_sim::MslArg& a : sig.args) {
    if (a.kind != metal_sim::MslArg::Kind::packed) continue;
    auto it = d.bytes.find(static_cast<NSUInteger>(a.binding));
    if (it == d.bytes.end() || it->second.size() != packed_bytes)
      return cat("setBytes at index ", a.binding, " ('", a.name, "', ", packed_bytes,
                 " bytes) is missing or of the wrong length");
    packed = &it->second;
  }
  for (size_t i = 0; i < sig.args.size(); ++i) {
    const metal_sim::MslArg& a = sig.args[i];
    auto index = static_cast<NSUInteger>(a.binding);
    if (a.kind == metal_sim::MslArg::Kind::member) {
      uint64_t bits = 0;
      std::memcpy(&bits, packed->data() + offsets[i], dtype_size(a.dtype));
      args.push_back(metal_sim::SimArg::scalar(bits));
      continue;
    }
    if (a.kind == metal_sim::MslArg::Kind::threadgroup) {
      auto it = d.threadgroup_lengths.find(index);
      if (it == d.threadgroup_lengths.end() || it->second == 0 || it->second % 16 != 0)
        return cat("threadgroup memory length at index ", index, " is unset or not a multiple of 16");
      counts.push_back(it->second / dtype_size(a.dtype));
    } else if (a.kind == metal_sim::MslArg::Kind::buffer) {
      auto it = d.buffers.find(index);
      if (it == d.buffers.end()) return cat("no buffer bound at index ", index, " ('", a.name, "')");
      Buffer* b = it->second.first;
      if (it->second.second > b->length) return cat("buffer offset past the end at index ", index);
      args.push_back(metal_sim::SimArg::buffer(static_cast<char*>(b->data) + it->second.second));
    } else if (a.kind == metal_sim::MslArg::Kind::scalar) {
      auto it = d.bytes.find(index);
      if (it == d.bytes.end() || it->second.size() != dtype_size(a.dtype))
        return cat("setBytes at index ", index, " ('", a.name, "') is missing or of the wrong length");
      uint64_t bits = 0;
      std::memcpy(&bits, it->second.data(), it->second.size());
      args.push_back(metal_sim::SimArg::scalar(bits));
    }
  }
  metal_sim::SimKernel* kernel;
  {
    std::lock_guard<std::mutex> lock(d.kernel->mu);
    auto it = d.kernel->loaded.find(counts);
    if (it == d.kernel->loaded.end()) {
      metal_sim::MslSignature s = sig;
      size_t next = 0;
      for (metal_sim::MslArg& a : s.args)
        if (a.kind == metal_sim::MslArg::Kind::threadgroup) a.count = counts[next++];
      it = d.kernel->loaded.emplace(counts, metal_sim::load_msl(d.kernel->so, s)).first;
    }
    kernel = &it->second;
  }
  // As on a GPU, nothing but the kernel's own checks of its stop word stops it: metal-sim's
  // host checks (time limit, metile_cancel_launches) stay off.
  kernel->launch({static_cast<uint32_t>(d.groups.width), static_cast<uint32_t>(d.groups.height),
                  static_cast<uint32_t>(d.groups.depth)},
                 {static_cast<uint32_t>(d.threads.width), static_cast<uint32_t>(d.threads.height),
                  static_cast<uint32_t>(d.threads.depth)},
                 args, /*host_stops=*/false);
  return {};
}

void execute(CommandBuffer* cb) {
  std::string why;
  for (const Dispatch& d : cb->dispatches) {
    try {
      why = run(d);
    } catch (const Error& e) {
      why = e.what();
    }
    if (!why.empty()) break;
  }
  if (!why.empty()) {
    cb->error = new_error(1 /* MTLCommandBufferErrorInternal */, why);
  }
}

void run_queue(std::shared_ptr<QueueWorker> w) {
  for (;;) {
    CommandBuffer* cb;
    {
      std::unique_lock<std::mutex> lock(w->mu);
      w->cv.wait(lock, [&] { return w->stop || !w->jobs.empty(); });
      if (w->jobs.empty()) return;
      cb = w->jobs.front();
      w->jobs.pop_front();
    }
    execute(cb);
    NSUInteger status = cb->error ? 5 : 4;  // MTLCommandBufferStatusError / Completed
    std::shared_ptr<Completion> c = cb->completion;
    standin_objc_release(cb);
    std::lock_guard<std::mutex> lock(c->mu);
    c->status = status;
    c->cv.notify_all();
  }
}

void command_buffer_commit(id self, SEL) {
  CommandBuffer* cb = as<CommandBuffer>(self);
  cb->completion->status = 2;  // MTLCommandBufferStatusCommitted
  QueueWorker& w = *cb->queue->worker;
  std::lock_guard<std::mutex> lock(w.mu);
  w.jobs.push_back(static_cast<CommandBuffer*>(standin_objc_retain(cb)));  // the GPU holds it
  w.cv.notify_all();
}
void command_buffer_wait(id self, SEL) {
  Completion& c = *as<CommandBuffer>(self)->completion;
  std::unique_lock<std::mutex> lock(c.mu);
  c.cv.wait(lock, [&] { return c.status == 0 || c.status >= 4; });
}
NSUInteger command_buffer_status(id self, SEL) { return as<CommandBuffer>(self)->completion->status.load(); }
id command_buffer_error(id self, SEL) { return as<CommandBuffer>(self)->error; }

// ---- MTLDevice ---------------------------------------------------------------------------------

struct Device {
  standin_object header;
  NSString* name = nullptr;
  ~Device() { standin_objc_release(name); }
};

id device_name(id self, SEL) { return as<Device>(self)->name; }
BOOL device_supports_family(id, SEL, NSInteger family) {
  // An M1-class GPU: Apple1-7, Mac2, Common1-3, Metal3. METILE_STANDIN_GPU_FAMILY=apple<N>
  // (N in 8..10) makes it an Apple<N> GPU, with Metal 4 from apple9 on (the tensor_ops path).
  static const int apple = [] {
    const char* v = std::getenv("METILE_STANDIN_GPU_FAMILY");
    for (int n = 8; v != nullptr && n <= 10; ++n)
      if (std::string(v) == "apple" + std::to_string(n)) return n;
    return 7;
  }();
  return (family >= 1001 && family <= 1000 + apple) || family == 2002 ||
         (family >= 3001 && family <= 3003) || family == 5001 || (family == 5002 && apple >= 9);
}
MTLSize device_max_threads(id, SEL) { return {1024, 1024, 1024}; }
NSUInteger device_max_threadgroup_memory(id, SEL) { return 32768; }
id device_new_command_queue(id, SEL) {
  CommandQueue* q = make<CommandQueue>("StandinCommandQueue");
  q->worker = std::make_shared<QueueWorker>();
  std::thread(run_queue, q->worker).detach();
  return q;
}

id device_new_buffer(id, SEL, NSUInteger length, NSUInteger options) {
  NSUInteger limit = allocation_limit.load();
  if (limit != 0 && length > limit) return nullptr;
  Buffer* b = make<Buffer>("StandinBuffer");
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (posix_memalign(&b->data, page, (length + page - 1) / page * page) != 0) {
    standin_objc_release(b);
    return nullptr;
  }
  std::memset(b->data, 0, length);
  b->length = length;
  b->owned = true;
  b->shared = ((options >> 4) & 0xf) == 0;  // MTLResourceStorageModeShared
  return b;
}

id device_new_buffer_no_copy(id, SEL, void* pointer, NSUInteger length, NSUInteger options,
                             id deallocator) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (reinterpret_cast<uintptr_t>(pointer) % page != 0 || length % page != 0 || length == 0 ||
      deallocator != nullptr) {
    rejected_no_copy.fetch_add(1);
    return nullptr;  // Metal requires page-aligned memory (its validation layer stops here)
  }
  Buffer* b = make<Buffer>("StandinBuffer");
  b->data = pointer;
  b->length = length;
  b->shared = ((options >> 4) & 0xf) == 0;
  return b;
}

id device_new_library_with_source(id, SEL, id source, id options, id* error) {
  if (options != nullptr && as<CompileOptions>(options)->fast_math) {
    set_error(error, 3, "the stand-in compiles with IEEE semantics only; fastMathEnabled must be NO");
    return nullptr;
  }
  NSUInteger language = options != nullptr ? as<CompileOptions>(options)->language : kLanguageVersion3_2;
  return compile_library(as<NSString>(source)->text, language, error);
}

// A stand-in "metallib" is this line followed by the MSL (tests/metal_standin/fake_xcrun.sh).
constexpr const char kMetallibMagic[] = "METILE-STANDIN-METALLIB\n";

id device_new_library_with_url(id, SEL, id url, id* error) {
  std::ifstream in(as<NSURL>(url)->path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.rfind(kMetallibMagic, 0) != 0) {
    set_error(error, 1, cat("not a metallib: ", as<NSURL>(url)->path));
    return nullptr;
  }
  // fake_xcrun.sh checked the language version when it "compiled" the metallib.
  return compile_library(bytes.substr(sizeof kMetallibMagic - 1), kLanguageVersion4_0, error);
}

id device_new_pipeline(id, SEL, id function, id* error) {
  if (function == nullptr) {
    set_error(error, 1, "no function");
    return nullptr;
  }
  Pipeline* p = make<Pipeline>("StandinComputePipelineState");
  p->kernel = as<Function>(function)->kernel;
  p->max_threads = pipeline_max_threads.load();
  return p;
}

template <class F>
void method(standin_class* c, const char* sel, F* imp, int class_method = 0) {
  standin_objc_add_method(c, sel, reinterpret_cast<void*>(imp), class_method);
}

__attribute__((constructor)) void define_classes() {
  auto cls = [](const char* name) { return standin_objc_define_class(name, "NSObject"); };
  standin_class* c = cls("NSString");
  method(c, "alloc", string_alloc, 1);
  method(c, "initWithBytes:length:encoding:", string_init_with_bytes);
  method(c, "UTF8String", string_utf8);
  c = cls("NSError");
  method(c, "localizedDescription", error_description);
  method(c, "code", error_code);
  method(cls("NSURL"), "fileURLWithPath:", url_file_url_with_path, 1);
  c = cls("MTLCompileOptions");
  method(c, "alloc", options_alloc, 1);
  method(c, "setFastMathEnabled:", options_set_fast_math);
  method(c, "setLanguageVersion:", options_set_language_version);
  c = cls("StandinDevice");
  method(c, "name", device_name);
  method(c, "supportsFamily:", device_supports_family);
  method(c, "maxThreadsPerThreadgroup", device_max_threads);
  method(c, "maxThreadgroupMemoryLength", device_max_threadgroup_memory);
  method(c, "newCommandQueue", device_new_command_queue);
  method(c, "newBufferWithLength:options:", device_new_buffer);
  method(c, "newBufferWithBytesNoCopy:length:options:deallocator:", device_new_buffer_no_copy);
  method(c, "newLibraryWithSource:options:error:", device_new_library_with_source);
  method(c, "newLibraryWithURL:error:", device_new_library_with_url);
  method(c, "newComputePipelineStateWithFunction:error:", device_new_pipeline);
  c = cls("StandinBuffer");
  method(c, "contents", buffer_contents);
  method(c, "length", buffer_length);
  method(cls("StandinLibrary"), "newFunctionWithName:", library_new_function);
  cls("StandinFunction");
  method(cls("StandinComputePipelineState"), "maxTotalThreadsPerThreadgroup", pipeline_max_total_threads);
  method(cls("StandinCommandQueue"), "commandBuffer", queue_command_buffer);
  c = cls("StandinCommandBuffer");
  method(c, "computeCommandEncoder", command_buffer_compute_encoder);
  method(c, "commit", command_buffer_commit);
  method(c, "waitUntilCompleted", command_buffer_wait);
  method(c, "status", command_buffer_status);
  method(c, "error", command_buffer_error);
  c = cls("StandinComputeCommandEncoder");
  method(c, "setComputePipelineState:", encoder_set_pipeline);
  method(c, "setBuffer:offset:atIndex:", encoder_set_buffer);
  method(c, "setBytes:length:atIndex:", encoder_set_bytes);
  method(c, "setThreadgroupMemoryLength:atIndex:", encoder_set_threadgroup_memory);
  method(c, "dispatchThreadgroups:threadsPerThreadgroup:", encoder_dispatch);
  method(c, "endEncoding", encoder_end);
}

}  // namespace

extern "C" {

id MTLCreateSystemDefaultDevice(void) {
  Device* d = make<Device>("StandinDevice");
  d->name = new_string("metile stand-in Metal GPU (metal-sim engine)");
  return d;
}

void standin_metal_fail_allocations_over(unsigned long bytes) { allocation_limit = bytes; }
void standin_metal_set_pipeline_max_threads(unsigned long threads) { pipeline_max_threads = threads; }
long standin_metal_rejected_no_copy(void) { return rejected_no_copy.load(); }

}  // extern "C"
