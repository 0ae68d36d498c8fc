// metile_event_*: timing and waiting on points in a device's queue.
#include <cmath>

#include "checked.h"
#include "guard.h"
#include "handles.h"

using namespace metile;
using capi::get;
using capi::guard;

extern "C" {

METILE_API metile_status metile_event_create(metile_event** out, metile_device* d) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    auto dev = get(d, fn)->impl;
    auto h = capi::make_handle<metile_event>();
    h->impl = dev->create_event();
    h->device = std::move(dev);
    *out = capi::publish(h);
  });
}

METILE_API metile_status metile_event_record(metile_event* e, uint64_t stream) {
  return guard(__func__, [&](const char* fn) { get(e, fn)->impl->record(stream); });
}

METILE_API metile_status metile_event_synchronize(metile_event* e) {
  return guard(__func__, [&](const char* fn) { get(e, fn)->impl->synchronize(); });
}

METILE_API metile_status metile_event_elapsed_ms(metile_event* start, metile_event* end,
                                                 double* out_ms) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out_ms);
    auto s = get(start, fn);
    auto e = get(end, fn);
    if (s->device != e->device)
      fail(METILE_ERROR_INVALID_ARGUMENT, "event", fn, ": the events belong to different devices (",
           s->device->info().label(), " and ", e->device->info().label(), ")");
    *out_ms = e->impl->elapsed_ms_since(*s->impl);
  });
}

METILE_API metile_status metile_event_release(metile_event* e) {
  return guard(__func__, [&](const char* fn) { capi::release(e, fn); });
}

}  // extern "C"
