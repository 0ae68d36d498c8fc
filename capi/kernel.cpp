// metile_kernel_* and metile_launch_*: compiling, argument checking, launching.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "checked.h"
#include "guard.h"
#include "handles.h"
#include "ir/gpu_ir.h"
#include "out_string.h"
#include "runtime/host/cancel.h"
#include "support/half.h"
#include "support/stage.h"
#include "support/text.h"

using namespace metile;
using capi::get;
using capi::guard;

namespace {

const char* kind_name(metile_arg_kind k) {
  switch (k) {
    case METILE_ARG_BUFFER: return "buffer";
    case METILE_ARG_I32: return "i32";
    case METILE_ARG_U32: return "u32";
    case METILE_ARG_I64: return "i64";
    case METILE_ARG_F32: return "f32";
    case METILE_ARG_F64: return "f64";
    default: return "unknown";
  }
}

// The scalar's bits in the parameter's dtype; rejects values that do not fit exactly.
uint64_t scalar_bits(const Program& p, const Param& prm, const metile_arg& a) {
  DType d = p.type(prm.value).dtype;
  bool int_arg = a.kind == METILE_ARG_I32 || a.kind == METILE_ARG_U32 || a.kind == METILE_ARG_I64;
  bool float_arg = a.kind == METILE_ARG_F32 || a.kind == METILE_ARG_F64;
  auto bad = [&](const char* why) {
    fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "argument `", prm.name, "` (", dtype_name(d),
         "): ", why);
  };
  if (!int_arg && !float_arg) bad(cat("got a ", kind_name(a.kind), " argument").c_str());
  // The kind is the caller's claim about `i`: a u32 of -5 is a caller bug even where the
  // parameter could hold -5.
  if ((a.kind == METILE_ARG_I32 && (a.i < INT32_MIN || a.i > INT32_MAX)) ||
      (a.kind == METILE_ARG_U32 && (a.i < 0 || a.i > int64_t{UINT32_MAX})))
    bad(cat("value ", a.i, " is not a ", kind_name(a.kind)).c_str());
  if (is_float(d)) {
    double v = int_arg ? static_cast<double>(a.i) : a.f;
    if (int_arg && static_cast<int64_t>(v) != a.i) bad("the integer is not exactly representable");
    float f = static_cast<float>(v);
    if (d == DType::f32) return float_bits(f);
    if (d == DType::f16) return float_to_f16(f);
    return float_to_bf16(f);
  }
  if (!int_arg) bad("got a float for an integer parameter");
  int64_t v = a.i;
  std::optional<IntRange> range = int_range(d);
  if (!range) bad("unsupported parameter dtype");
  if (v < range->lo || v > range->hi) bad(cat("value ", v, " is out of range").c_str());
  uint64_t bits = static_cast<uint64_t>(v);
  size_t size = dtype_size(d);
  return size == 8 ? bits : bits & ((uint64_t{1} << (size * 8)) - 1);
}

LaunchArg check_arg(const CompiledKernel& k, size_t i, const metile_arg& a,
                    std::shared_ptr<Buffer>* keep, const char* fn) {
  const Program& p = *k.program;
  const Param& prm = p.params[i];
  const Type& t = p.type(prm.value);
  LaunchArg out;
  if (t.is_ptr) {
    if (a.kind != METILE_ARG_BUFFER)
      fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "argument `", prm.name, "` (",
           t.str(), ") needs a buffer, got ", kind_name(a.kind));
    if (a.buffer == nullptr)
      fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "argument `", prm.name, "` (", t.str(),
           "): the buffer is NULL");
    capi::Ref<metile_buffer> b;
    try {
      b = get(a.buffer, fn);
    } catch (const Error&) {
      fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "argument `", prm.name, "` (", t.str(),
           "): ", static_cast<const void*>(a.buffer),
           " is not a live metile_buffer (released, or another kind of handle)");
    }
    // Devices address only their own buffers (another GPU's memory, a host device's copy).
    const Device* owner = b->impl->underlying()->device;
    if (owner != k.device.get() || b->impl->device != k.device.get())
      fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "argument `", prm.name, "`: the buffer belongs to device ",
           owner ? owner->info().label() : std::string("(none)"), ", the kernel ", p.name,
           " runs on ", k.device->info().label());
    size_t elem = dtype_size(t.dtype);
    if (a.offset > b->impl->size() || a.offset % elem != 0)
      fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "argument `", prm.name, "`: offset ", a.offset,
           " is past the buffer's ", b->impl->size(), " bytes or not a multiple of ", elem);
    out.buffer = b->impl.get();
    out.offset = a.offset;
    if (keep) *keep = b->impl;
    return out;
  }
  out.bits = scalar_bits(p, prm, a);
  return out;
}

std::vector<LaunchArg> check_args(const CompiledKernel& k, const metile_arg* args, size_t n,
                                  std::vector<std::shared_ptr<Buffer>>* keep, const char* fn) {
  const Program& p = *k.program;
  if (n != p.params.size())
    fail(METILE_ERROR_INVALID_ARGUMENT, "launch", p.name, " takes ", p.params.size(),
         " arguments, got ", n);
  if (n > 0) METILE_CHECK_ARG(args);
  std::vector<LaunchArg> out(n);
  if (keep) keep->resize(n);
  for (size_t i = 0; i < n; ++i) out[i] = check_arg(k, i, args[i], keep ? &(*keep)[i] : nullptr, fn);
  return out;
}

Grid check_grid(const uint32_t* grid, const char* fn) {
  METILE_CHECK_ARG(grid);
  Grid g;
  for (int i = 0; i < 3; ++i) {
    if (grid[i] == 0)
      fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "grid[", i, "] is 0 (each dimension must be >= 1)");
    g.dims[i] = grid[i];
  }
  // Devices count program instances in 64 bits (signed where they index them); a product that
  // does not fit would silently run a wrapped (often zero) number of instances.
  unsigned __int128 total = static_cast<unsigned __int128>(grid[0]) * grid[1] * grid[2];
  if (total > static_cast<unsigned __int128>(INT64_MAX))
    fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "grid {", grid[0], ", ", grid[1], ", ", grid[2],
         "} has more than 2^63 - 1 program instances");
  return g;
}

CompileOptions options_of(const metile_compile_options* o) {
  CompileOptions c;
  if (o == nullptr) return c;
  // Callers built against an older header pass a shorter struct: fields past it keep defaults.
  if (o->struct_size < offsetof(metile_compile_options, check_bounds))
    fail(METILE_ERROR_INVALID_ARGUMENT, "api",
         "metile_compile_options.struct_size is too small (use metile_compile_options_init)");
  auto has = [&](size_t offset) { return o->struct_size >= offset + sizeof(int32_t); };
  if (o->num_threads < 0 || o->num_threads > 4096)
    fail(METILE_ERROR_INVALID_ARGUMENT, "api", "num_threads ", o->num_threads, " is out of range");
  if (o->allow_tf32 < -1 || o->allow_tf32 > 1)
    fail(METILE_ERROR_INVALID_ARGUMENT, "api", "allow_tf32 must be -1, 0 or 1");
  if (o->opt_level < 0 || o->opt_level > 1)
    fail(METILE_ERROR_INVALID_ARGUMENT, "api", "opt_level must be 0 or 1, got ", o->opt_level);
  c.num_threads = o->num_threads;
  c.allow_tf32 = o->allow_tf32;
  c.opt_level = o->opt_level;
  c.no_cache = o->no_cache != 0;
  if (has(offsetof(metile_compile_options, check_bounds))) c.check_bounds = o->check_bounds != 0;
  if (has(offsetof(metile_compile_options, unchecked))) c.unchecked = o->unchecked != 0;
  if (has(offsetof(metile_compile_options, no_fuse_reductions)))
    c.fuse_reductions = o->no_fuse_reductions == 0;
  if (has(offsetof(metile_compile_options, keep_rows))) c.keep_rows = o->keep_rows != 0;
  if (has(offsetof(metile_compile_options, num_stages))) {
    if (o->num_stages < 0 || o->num_stages > 8)
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", "num_stages ", o->num_stages,
           " is out of range (0 = the device's choice, 1 = no pipeline, up to 8)");
    c.num_stages = o->num_stages;
  }
  if (has(offsetof(metile_compile_options, warps_n))) {
    for (auto [name, v] : {std::pair{"warps_m", o->warps_m}, std::pair{"warps_n", o->warps_n}})
      if (v < 0 || v > 32) fail(METILE_ERROR_INVALID_ARGUMENT, "api", name, " ", v, " is out of range (0..32)");
    if ((o->warps_m == 0) != (o->warps_n == 0))
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", "warps_m ", o->warps_m, " and warps_n ", o->warps_n,
           ": set both (a warp grid) or neither");
    c.warps_m = o->warps_m;
    c.warps_n = o->warps_n;
  }
  if (has(offsetof(metile_compile_options, split_k))) {
    if (o->split_k < 0 || o->split_k > 64)
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", "split_k ", o->split_k,
           " is out of range (0 = the compiler's choice, 1 = off, up to 64 parts)");
    c.split_k = o->split_k;
  }
  if (has(offsetof(metile_compile_options, dot_precision))) {
    if (o->dot_precision < 0 || o->dot_precision > METILE_DOT_PRECISION_TF32X3)
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", "dot_precision ", o->dot_precision,
           " is not a metile_dot_precision (0 = default, 1 = ieee, 2 = tf32, 3 = tf32x3)");
    c.dot_precision = o->dot_precision;
  }
  if (has(offsetof(metile_compile_options, maxnreg))) {
    if (o->maxnreg != 0 && (o->maxnreg < gpu::kMinMaxRegisters || o->maxnreg > gpu::kMaxMaxRegisters))
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", "maxnreg ", o->maxnreg, " is out of range (0 = the compiler's choice, ",
           gpu::kMinMaxRegisters, "..", gpu::kMaxMaxRegisters, " registers a thread)");
    c.max_registers = o->maxnreg;
  }
  if (c.allow_tf32 >= 0 && c.dot_precision != 0 &&
      c.dot_precision != (c.allow_tf32 ? METILE_DOT_PRECISION_TF32 : METILE_DOT_PRECISION_IEEE))
    fail(METILE_ERROR_INVALID_ARGUMENT, "api", "allow_tf32 ", c.allow_tf32, " contradicts dot_precision ",
         dot_precision_name(static_cast<DotPrecision>(c.dot_precision)));
  return c;
}

}  // namespace

extern "C" {

METILE_API void metile_compile_options_init(metile_compile_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->allow_tf32 = -1;
  o->opt_level = 1;
}

METILE_API metile_status metile_kernel_compile(metile_kernel** out, metile_device* d,
                                               const metile_program* p,
                                               const metile_compile_options* options) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    auto dev = get(d, fn)->impl;
    auto prog = get(p, fn)->impl;
    auto ck = compile_kernel(dev, prog, options_of(options));
    auto h = capi::make_handle<metile_kernel>();
    h->impl = std::move(ck);
    h->device = std::move(dev);
    *out = capi::publish(h);
  });
}

METILE_API metile_status metile_kernel_retain(metile_kernel* k) {
  return guard(__func__, [&](const char* fn) { capi::retain(k, fn); });
}

METILE_API metile_status metile_kernel_release(metile_kernel* k) {
  return guard(__func__, [&](const char* fn) { capi::release(k, fn); });
}

METILE_API metile_status metile_kernel_source(const metile_kernel* k, const char* stage, char** out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(stage);
    METILE_CHECK_ARG(out);
    auto kh = get(k, fn);
    const CompiledKernel& ck = *kh->impl;
    std::string s = stage;
    std::optional<Stage> named = parse_stage(s);
    if (named == Stage::tile_ir) {
      *out = capi::dup_string(print(*ck.program));
      return;
    }
    auto it = named ? ck.artifact.sources.find(*named) : ck.artifact.sources.end();
    if (it == ck.artifact.sources.end()) {
      std::string have = "tile_ir";
      for (const auto& kv : ck.artifact.sources) have += cat(", ", stage_name(kv.first));
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": no stage \"", printable_ascii(s),
           "\" for this kernel (available: ", have, ")");
    }
    *out = capi::dup_string(it->second);
  });
}

METILE_API metile_status metile_kernel_cache_key(const metile_kernel* k, char* out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    auto kh = get(k, fn);
    const std::string& key = kh->impl->cache_key;
    std::memcpy(out, key.c_str(), std::min<size_t>(key.size(), 64) + 1);
    out[std::min<size_t>(key.size(), 64)] = '\0';
  });
}

static_assert(offsetof(metile_kernel_info, threadgroup_memory_limit) == METILE_KERNEL_INFO_V1_SIZE,
              "METILE_KERNEL_INFO_V1_SIZE is the struct's size before threadgroup_memory_limit");

METILE_API metile_status metile_kernel_get_info(const metile_kernel* k, metile_kernel_info* out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    auto kh = get(k, fn);
    const CompiledKernel& ck = *kh->impl;
    if (out->struct_size < METILE_KERNEL_INFO_V1_SIZE)
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": struct_size ", out->struct_size,
           " is too small (set it to sizeof(metile_kernel_info))");
    out->threads_per_group = ck.artifact.threads_per_group;
    out->threadgroup_memory_bytes = ck.artifact.threadgroup_memory_bytes;
    out->from_cache = ck.from_cache ? 1 : 0;
    out->compile_seconds = ck.seconds;
    // Later fields: only as far as the caller's struct reaches.
    auto covers = [&](size_t offset, size_t size) { return out->struct_size >= offset + size; };
    if (covers(offsetof(metile_kernel_info, threadgroup_memory_limit), sizeof(uint64_t)))
      out->threadgroup_memory_limit = ck.device->info().threadgroup_memory_bytes;
    if (covers(offsetof(metile_kernel_info, registers_per_thread), sizeof(int32_t)))
      out->registers_per_thread = ck.kernel->registers_per_thread();
  });
}

METILE_API metile_status metile_kernel_launch(metile_kernel* k, const uint32_t grid[3],
                                              const metile_arg* args, size_t num_args) {
  return guard(__func__, [&](const char* fn) {
    auto kh = get(k, fn);
    CompiledKernel& ck = *kh->impl;
    Grid g = check_grid(grid, fn);
    std::vector<std::shared_ptr<Buffer>> keep;  // a concurrent buffer release waits for the launch
    ck.kernel->launch(g, check_args(ck, args, num_args, &keep, fn));
  });
}

METILE_API metile_status metile_launch_create(metile_launch** out, metile_kernel* k,
                                              const uint32_t grid[3], const metile_arg* args,
                                              size_t num_args) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    auto ck = get(k, fn)->impl;
    Grid g = check_grid(grid, fn);
    std::vector<std::shared_ptr<Buffer>> keep;
    auto launch = ck->kernel->prepare(g, check_args(*ck, args, num_args, &keep, fn));
    launch->keep_alive = std::move(keep);
    auto h = capi::make_handle<metile_launch>();
    h->impl = std::move(launch);
    h->kernel = std::move(ck);
    *out = capi::publish(h);
  });
}

METILE_API metile_status metile_launch_set_arg(metile_launch* l, size_t index, const metile_arg* arg) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(arg);
    auto h = get(l, fn);
    if (index >= h->impl->args.size())
      fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "argument index ", index, " out of range (",
           h->impl->args.size(), " parameters)");
    std::shared_ptr<Buffer> keep;
    h->impl->args[index] = check_arg(*h->kernel, index, *arg, &keep, fn);
    h->impl->keep_alive[index] = std::move(keep);
    h->impl->update();
  });
}

// Parameter `index` of `p`, which a caller points at memory: it must exist and be a pointer.
static const Param& pointer_param(const Program& p, size_t index) {
  if (index >= p.params.size())
    fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "argument index ", index, " out of range (",
         p.params.size(), " parameters)");
  const Param& prm = p.params[index];
  if (!p.type(prm.value).is_ptr)
    fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "argument `", prm.name, "` is a scalar, not a pointer");
  return prm;
}

METILE_API metile_status metile_launch_set_arg_memory(metile_launch* l, size_t index, void* host,
                                                      size_t bytes) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(host);
    auto h = get(l, fn);
    const Param& prm = pointer_param(*h->kernel->program, index);
    if (bytes == 0) fail(METILE_ERROR_INVALID_ARGUMENT, "launch", fn, ": size must be > 0");
    capi::check_address_range(reinterpret_cast<uintptr_t>(host), bytes, fn, "host, bytes");
    std::shared_ptr<Buffer> buf = h->kernel->device->wrap(host, bytes);
    if (!buf->shares_memory())
      fail(METILE_ERROR_UNSUPPORTED, "launch", "the ", h->kernel->device->info().name,
           " device cannot use this memory in place (argument `", prm.name,
           "`); wrap it in a metile_buffer instead");
    LaunchArg a;
    a.buffer = buf.get();
    h->impl->args[index] = a;
    h->impl->keep_alive[index] = std::move(buf);
    h->impl->update();
  });
}

METILE_API metile_status metile_launch_set_arg_device_memory(metile_launch* l, size_t index,
                                                             uint64_t address, size_t bytes) {
  return guard(__func__, [&](const char* fn) {
    auto h = get(l, fn);
    pointer_param(*h->kernel->program, index);
    if (address == 0) fail(METILE_ERROR_INVALID_ARGUMENT, "launch", fn, ": address is 0");
    if (bytes == 0) fail(METILE_ERROR_INVALID_ARGUMENT, "launch", fn, ": size must be > 0");
    capi::check_address_range(address, bytes, fn, "address, bytes");
    Device& device = *h->kernel->device;
    device.check_device_memory(address, bytes);
    std::shared_ptr<Buffer> buf = device.wrap_device_memory(address, bytes, false);
    LaunchArg a;
    a.buffer = buf.get();
    h->impl->args[index] = a;
    h->impl->keep_alive[index] = std::move(buf);
    h->impl->update();
  });
}

METILE_API metile_status metile_launch_set_grid(metile_launch* l, const uint32_t grid[3]) {
  return guard(__func__, [&](const char* fn) {
    auto h = get(l, fn);
    h->impl->grid = check_grid(grid, fn);
    h->impl->update();
  });
}

METILE_API metile_status metile_launch_set_options(metile_launch* l, const metile_launch_options* o) {
  return guard(__func__, [&](const char* fn) {
    auto h = get(l, fn);
    LaunchOptions opts;
    if (o != nullptr) {
      if (o->struct_size < sizeof(metile_launch_options))
        fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn,
             ": struct_size is too small (use METILE_LAUNCH_OPTIONS_INIT)");
      if (std::isnan(o->timeout_s))
        fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": timeout_s is NaN (seconds; 0: no limit; "
             "negative: METILE_TIMEOUT_S)");
      opts.timeout_s = o->timeout_s < 0 ? -1 : o->timeout_s;
      opts.stream = o->stream;
    }
    h->impl->options = opts;
  });
}

METILE_API metile_status metile_launch_run(metile_launch* l) {
  return guard(__func__, [&](const char* fn) {
    auto h = get(l, fn);
    host::ScopedLaunchLimit limit(h->impl->options.timeout_s);
    h->impl->run();
  });
}

METILE_API metile_status metile_launch_release(metile_launch* l) {
  return guard(__func__, [&](const char* fn) { capi::release(l, fn); });
}

METILE_API void metile_cancel_launches(void) { host::cancel_launches(); }

}  // extern "C"
