// metile_cache_* and metile_autotune_*: the process-wide compile cache and autotuning helpers.
#include <algorithm>
#include <chrono>
#include <vector>

#include "cache/cache.h"
#include "guard.h"
#include "handles.h"
#include "out_string.h"

using namespace metile;
using capi::get;
using capi::guard;

namespace {

// Median milliseconds of `rep` runs of `launch`, each bracketed by device synchronization so the
// time is the kernel's, not the enqueue's, on asynchronous devices.
double time_launch(const metile_launch& h, int warmup, int rep) {
  Device& device = *h.kernel->device;
  for (int i = 0; i < warmup; ++i) h.impl->run();
  device.synchronize();
  std::vector<double> samples(static_cast<size_t>(rep));
  for (double& s : samples) {
    auto start = std::chrono::steady_clock::now();
    h.impl->run();
    device.synchronize();
    s = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  std::sort(samples.begin(), samples.end());
  size_t mid = samples.size() / 2;
  return samples.size() % 2 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
}

}  // namespace

extern "C" {

METILE_API metile_status metile_cache_set_dir(const char* dir) {
  return guard(__func__, [&](const char*) {
    global_cache().set_dir(dir ? std::optional<std::string>(dir) : std::nullopt);
  });
}

METILE_API metile_status metile_cache_get_dir(char** out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    std::string dir = global_cache().dir();
    if (dir.empty())
      fail(METILE_ERROR_IO, "cache",
           "no cache directory: set METILE_CACHE_DIR (or HOME), or call metile_cache_set_dir");
    *out = capi::dup_string(dir);
  });
}

METILE_API metile_status metile_cache_set_enabled(int32_t enabled) {
  return guard(__func__, [&](const char* fn) {
    if (enabled != 0 && enabled != 1)
      fail(METILE_ERROR_INVALID_ARGUMENT, "cache", fn, ": enabled must be 0 or 1, got ",
           enabled);
    global_cache().set_enabled(enabled == 1);
  });
}

METILE_API metile_status metile_cache_set_max_bytes(uint64_t max_bytes) {
  return guard(__func__, [&](const char*) { global_cache().set_max_bytes(max_bytes); });
}

METILE_API metile_status metile_cache_get_stats(metile_cache_stats* out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    if (out->struct_size < sizeof(metile_cache_stats))
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn,
           ": struct_size is too small (set it to sizeof(metile_cache_stats))");
    CacheStats s = global_cache().stats();
    out->memory_hits = s.memory_hits;
    out->disk_hits = s.disk_hits;
    out->misses = s.misses;
    out->bytes_read = s.bytes_read;
    out->bytes_written = s.bytes_written;
    out->compile_seconds_saved = s.compile_seconds_saved;
  });
}

METILE_API metile_status metile_cache_clear(void) {
  return guard(__func__, [&](const char*) { global_cache().clear(); });
}

METILE_API metile_status metile_autotune_time(metile_launch* const* launches, size_t n,
                                              int32_t warmup, int32_t rep, double* out_ms) {
  return guard(__func__, [&](const char* fn) {
    if (n == 0) return;
    METILE_CHECK_ARG(launches);
    METILE_CHECK_ARG(out_ms);
    if (warmup < 0)
      fail(METILE_ERROR_INVALID_ARGUMENT, "autotune", "warmup must be >= 0, got ", warmup);
    if (rep < 1) fail(METILE_ERROR_INVALID_ARGUMENT, "autotune", "rep must be >= 1, got ", rep);
    // Check every handle before timing any, so a bad one fails fast and leaves out_ms untouched.
    std::vector<capi::Ref<metile_launch>> held;
    for (size_t i = 0; i < n; ++i) held.push_back(get(launches[i], fn));
    std::vector<double> ms(n);
    for (size_t i = 0; i < n; ++i) ms[i] = time_launch(*held[i], warmup, rep);
    std::copy(ms.begin(), ms.end(), out_ms);
  });
}

METILE_API metile_status metile_autotune_store(const char* key, const char* winner) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(key);
    METILE_CHECK_ARG(winner);
    global_cache().store_autotune(key, winner);
  });
}

METILE_API metile_status metile_autotune_lookup(const char* key, char** out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(key);
    METILE_CHECK_ARG(out);
    auto winner = global_cache().find_autotune(key);
    *out = winner ? capi::dup_string(*winner) : nullptr;
  });
}

}  // extern "C"
