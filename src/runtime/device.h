/** \file device.h
 * The device interface every backend implements (interp, cpu, metal, metal-sim, cuda), and the
 * device-independent objects around it: buffers, compiled kernels, prepared launches.
 *
 * Compilation is split in two so the compile cache (src/cache) can sit between the halves:
 * build() turns a verified Program into an Artifact (bytes + stage sources + metadata), load()
 * turns an Artifact into a runnable Kernel. A device whose cache_identity() is empty is never
 * disk-cached (interp).
 */
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/tile_ir.h"
#include "runtime/artifact.h"
#include "target/options.h"

namespace metile {

class Device;

struct DeviceInfo {
  std::string name;
  std::string description;
  std::string architecture;
  int simd_width = 1;
  int max_threads_per_group = 1;
  uint64_t threadgroup_memory_bytes = 0;
  bool unified_memory = true;
  bool asynchronous = false;
  /** Reports every access outside its buffer itself (interp): the compiler adds no guards. */
  bool checks_accesses = false;
  /** Runs each program's tiles in order on one host thread (interp, cpu), so a whole-tile
   * reduction is a plain loop; GPUs spread a tile over threads. Tile IR passes choose forms by it. */
  bool whole_tiles_in_order = false;
  /** Its GPU lowering takes dots on FP8 operands itself (cuda: the FP8 warpgroup atom where it fits,
   * else the operands staged as exact f16 values), so the fp8_dots Tile IR pass leaves them. */
  bool lowers_fp8_dots = false;
  /** The GPU's index among the machine's (cuda:N) where devices are chosen by index. */
  int ordinal = 0;
  bool indexed = false;
  /** "cuda:1", "cpu": the name open_device() knows it by. */
  std::string label() const { return indexed ? name + ":" + std::to_string(ordinal) : name; }
};

/** Device memory that the host can address: one allocation both sides use, no copies. */
class Buffer {
 public:
  virtual ~Buffer() = default;
  /** Host address of the first byte. */
  virtual void* contents() = 0;
  /** The address kernels on the device use (equal to contents() on cpu/interp). */
  virtual uint64_t device_address() { return reinterpret_cast<uint64_t>(contents()); }
  virtual size_t size() const = 0;
  virtual bool shares_memory() const { return false; }
  /** The buffer that owns the memory: this one, or the one a wrapper (a DLPack import) wraps.
   * Devices dispatch on its real kind, never on the wrapper's. */
  virtual Buffer* underlying() { return this; }
  Device* device = nullptr;
};

/** A launch argument after checking against the signature. */
struct LaunchArg {
  Buffer* buffer = nullptr;  // pointer parameters
  uint64_t offset = 0;       // byte offset into buffer
  uint64_t bits = 0;         // scalar parameters: the value in the parameter's dtype, zero-extended
};

struct Grid {
  std::array<uint32_t, 3> dims{1, 1, 1};
  uint64_t count() const { return uint64_t{dims[0]} * dims[1] * dims[2]; }
};

/** A launch's own settings (metile_launch_set_options). */
struct LaunchOptions {
  /** Its time limit in seconds (0: none); negative: METILE_TIMEOUT_S. Devices read it through
   * host::current_launch_limit(), which the C API sets around run(). */
  double timeout_s = -1;
  /** The stream it is queued on: 0 for the device's own, else a CUstream as an integer. Devices
   * without streams ignore it: their launches finish before run() returns. */
  uint64_t stream = 0;
};

/** A launch whose arguments were checked once; run() may be called many times. */
class PreparedLaunch {
 public:
  virtual ~PreparedLaunch() = default;
  virtual void run() = 0;
  /** Called after args/grid changed (set_arg, set_grid), before the next run(). */
  virtual void update() {}
  Grid grid;
  std::vector<LaunchArg> args;
  /** Keeps buffers alive while the launch exists. */
  std::vector<std::shared_ptr<Buffer>> keep_alive;
  LaunchOptions options;
};

/**
 * A point in a device's queue of work (metile_event_*): recorded on a stream, waited for, and
 * timed against another. The default (host_event.cpp) is for devices without streams: record()
 * waits for the device's launches and notes the host's clock.
 */
class Event {
 public:
  virtual ~Event() = default;
  /** Marks the work queued on `stream` so far (0: the device's own stream). */
  virtual void record(uint64_t stream) = 0;
  /** Waits until the marked work is done (at once when never recorded). */
  virtual void synchronize() = 0;
  /** Milliseconds from `start`'s mark to this one's; both recorded on the same device. */
  virtual double elapsed_ms_since(Event& start) = 0;
};
/** The event of a device without streams (host_event.cpp). */
std::unique_ptr<Event> make_host_event(Device& device);

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::unique_ptr<PreparedLaunch> prepare(const Grid& grid,
                                                  std::vector<LaunchArg> args) = 0;
  /** One-shot launch; devices may override with a faster path. */
  virtual void launch(const Grid& grid, std::vector<LaunchArg> args) {
    prepare(grid, std::move(args))->run();
  }
  /** Registers per thread where the device reports them (cuda); 0 when unknown. */
  virtual int registers_per_thread() const { return 0; }
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  virtual std::shared_ptr<Buffer> alloc(size_t bytes) = 0;
  /** Zero-copy when the device can address `host`, else a copy (shares_memory() false). */
  virtual std::shared_ptr<Buffer> wrap(void* host, size_t bytes) = 0;
  /**
   * Wraps memory the device already addresses (a CUDA pointer from DLPack kDLCUDA, or managed
   * memory, which the host can also read when `host_accessible`).
   */
  virtual std::shared_ptr<Buffer> wrap_device_memory(uint64_t address, size_t bytes,
                                                     bool host_accessible);
  /**
   * Throws INVALID_ARGUMENT unless `bytes` from `address` lie inside one allocation of this
   * device's memory (a raw address a caller hands in, not a producer's DLPack tensor);
   * UNSUPPORTED on devices without memory of their own.
   */
  virtual void check_device_memory(uint64_t address, size_t bytes);
  virtual void synchronize() {}
  /**
   * Ordering with other libraries' CUDA streams (DLPack's stream protocol); `stream` is a
   * CUstream as an integer (0 and 1: the legacy default stream, 2: the per-thread one).
   * wait_for_stream: launches issued from now on wait for the work queued on `stream` so far.
   * signal_stream: work queued on `stream` from now on waits for the launches issued so far.
   * Devices without streams finish their own launches before returning, so they need only
   * synchronize() for the second (an asynchronous device without streams does exactly that).
   */
  virtual void wait_for_stream(uint64_t stream) { (void)stream; }
  virtual void signal_stream(uint64_t stream) {
    (void)stream;
    synchronize();
  }
  /** The stream this device queues launches on, as an integer; 0 when it has none. */
  virtual uint64_t stream() const { return 0; }
  /**
   * A new stream of this device's, as an integer (never 0). Devices without streams return a
   * token that launches accept and ignore: each launch finishes before it returns.
   */
  virtual uint64_t create_stream();
  /** Destroys a stream create_stream() made, after the work queued on it. */
  virtual void destroy_stream(uint64_t stream) { (void)stream; }
  virtual std::unique_ptr<Event> create_event();
  /** Device kind + architecture + toolchain identity for cache keys; "" disables disk caching. */
  virtual std::string cache_identity() const { return {}; }
  virtual Artifact build(const Program& program, const CompileOptions& options) = 0;
  virtual std::shared_ptr<Kernel> load(std::shared_ptr<const Program> program,
                                       const CompileOptions& options, const Artifact& artifact) = 0;
};

/** Factory registry (registry.cpp): every backend registers {name, probe, create}. */
struct DeviceEntry {
  const char* name;
  /** Returns "" when the device can start here, else the reason it cannot. */
  std::string (*probe)();
  std::shared_ptr<Device> (*create)();
  /** Devices chosen by index ("cuda:1"): opens that one, or throws naming the index and the
   * count. Null for devices that have no index. */
  std::shared_ptr<Device> (*create_nth)(int ordinal) = nullptr;
  /** How many devices of this kind there are, once probe() passed (cuda: the GPUs). Null: 1. */
  int (*count)() = nullptr;
};
const std::vector<DeviceEntry>& device_registry();
/**
 * Opens (once per process) the named device; "" = default. A GPU is chosen by index:
 * "cuda:1" (for "cuda", "cuda:0"). Throws DEVICE_UNAVAILABLE.
 */
std::shared_ptr<Device> open_device(const std::string& name);
/** How many devices of kind `name` ("cuda", "cpu"; no index) can open here; 0 when the kind
 * cannot start. Throws INVALID_ARGUMENT for an unknown name or one with an index. */
int device_count(const std::string& name);

}  // namespace metile
