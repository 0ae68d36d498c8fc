// metile_device_*, metile_stream_* and metile_buffer_*.
#include <cstddef>

#include "checked.h"
#include "guard.h"
#include "handles.h"
#include "out_string.h"

using namespace metile;
using capi::get;
using capi::guard;

extern "C" {

METILE_API metile_status metile_device_open(metile_device** out, const char* name) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    auto dev = open_device(name ? name : "");
    auto h = capi::make_handle<metile_device>();
    h->impl = std::move(dev);
    *out = capi::publish(h);
  });
}

METILE_API metile_status metile_device_retain(metile_device* d) {
  return guard(__func__, [&](const char* fn) { capi::retain(d, fn); });
}

METILE_API metile_status metile_device_release(metile_device* d) {
  return guard(__func__, [&](const char* fn) { capi::release(d, fn); });
}

METILE_API metile_status metile_devices_available(char** out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    std::string names;
    for (const DeviceEntry& e : device_registry())
      if (e.probe().empty()) names += (names.empty() ? "" : ",") + std::string(e.name);
    *out = capi::dup_string(names);
  });
}

METILE_API metile_status metile_device_count(const char* name, int32_t* out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(name);
    METILE_CHECK_ARG(out);
    *out = device_count(name);
  });
}

METILE_API metile_status metile_device_get_info(const metile_device* d, metile_device_info* out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    auto dh = get(d, fn);
    const DeviceInfo& i = dh->impl->info();
    // Callers built against an older header pass the struct without `ordinal`.
    if (out->struct_size < offsetof(metile_device_info, ordinal))
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn,
           ": struct_size is too small (set it to sizeof(metile_device_info))");
    out->name = i.name.c_str();
    out->description = i.description.c_str();
    out->architecture = i.architecture.c_str();
    out->simd_width = i.simd_width;
    out->max_threads_per_group = i.max_threads_per_group;
    out->threadgroup_memory_bytes = i.threadgroup_memory_bytes;
    out->unified_memory = i.unified_memory ? 1 : 0;
    out->asynchronous = i.asynchronous ? 1 : 0;
    if (out->struct_size >= offsetof(metile_device_info, ordinal) + sizeof(int32_t))
      out->ordinal = i.ordinal;
  });
}

METILE_API metile_status metile_device_synchronize(metile_device* d) {
  return guard(__func__, [&](const char* fn) { get(d, fn)->impl->synchronize(); });
}

METILE_API metile_status metile_device_stream(metile_device* d, uint64_t* out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    *out = get(d, fn)->impl->stream();
  });
}

METILE_API metile_status metile_device_wait_stream(metile_device* d, uint64_t stream) {
  return guard(__func__, [&](const char* fn) { get(d, fn)->impl->wait_for_stream(stream); });
}

METILE_API metile_status metile_device_signal_stream(metile_device* d, uint64_t stream) {
  return guard(__func__, [&](const char* fn) { get(d, fn)->impl->signal_stream(stream); });
}

METILE_API metile_status metile_stream_create(metile_device* d, uint64_t* out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    *out = get(d, fn)->impl->create_stream();
  });
}

METILE_API metile_status metile_stream_destroy(metile_device* d, uint64_t stream) {
  return guard(__func__, [&](const char* fn) {
    if (stream == 0) fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": stream 0 is not one metile_stream_create made");
    get(d, fn)->impl->destroy_stream(stream);
  });
}

METILE_API metile_status metile_buffer_alloc(metile_buffer** out, metile_device* d, size_t bytes) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    auto dev = get(d, fn)->impl;
    if (bytes == 0) fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": size must be > 0");
    auto buf = dev->alloc(bytes);
    auto h = capi::make_handle<metile_buffer>();
    h->impl = std::move(buf);
    h->device = std::move(dev);
    *out = capi::publish(h);
  });
}

METILE_API metile_status metile_buffer_wrap(metile_buffer** out, metile_device* d, void* host,
                                            size_t bytes) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    METILE_CHECK_ARG(host);
    auto dev = get(d, fn)->impl;
    if (bytes == 0) fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": size must be > 0");
    capi::check_address_range(reinterpret_cast<uintptr_t>(host), bytes, fn, "host, bytes");
    auto buf = dev->wrap(host, bytes);
    auto h = capi::make_handle<metile_buffer>();
    h->impl = std::move(buf);
    h->device = std::move(dev);
    *out = capi::publish(h);
  });
}

METILE_API metile_status metile_buffer_retain(metile_buffer* b) {
  return guard(__func__, [&](const char* fn) { capi::retain(b, fn); });
}

METILE_API metile_status metile_buffer_release(metile_buffer* b) {
  return guard(__func__, [&](const char* fn) { capi::release(b, fn); });
}

METILE_API metile_status metile_buffer_contents(metile_buffer* b, void** out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    *out = get(b, fn)->impl->contents();
  });
}

METILE_API metile_status metile_buffer_size(const metile_buffer* b, size_t* out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    *out = get(b, fn)->impl->size();
  });
}

METILE_API int32_t metile_buffer_shares_memory(const metile_buffer* b) {
  int32_t r = 0;
  guard(__func__, [&](const char* fn) { r = get(b, fn)->impl->shares_memory() ? 1 : 0; });
  return r;
}

}  // extern "C"
