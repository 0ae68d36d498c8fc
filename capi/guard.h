/** \file guard.h
 * The exception firewall: every exported function runs its body through guard(), which turns a
 * thrown metile::Error (or anything else) into a metile_status plus the thread-local message.
 * guard() hands the body the exported function's name (`fn`), because __func__ inside the body's
 * lambda would name the lambda ("operator()"), and messages must name the API call.
 */
#pragma once

#include <new>
#include <string>

#include "support/error.h"

namespace metile::capi {

/** Stores the message returned by metile_last_error() on this thread. */
void set_last_error(const std::string& message);

/** Usage: `return guard(__func__, [&](const char* fn) { ... });` */
template <typename F>
metile_status guard(const char* fn, F&& body) noexcept {
  try {
    body(fn);
    return METILE_OK;
  } catch (const Error& e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error("[memory] out of memory");
    return METILE_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(std::string("[internal] unexpected exception: ") + e.what());
    return METILE_ERROR_INTERNAL;
  } catch (...) {
    set_last_error("[internal] unexpected non-standard exception");
    return METILE_ERROR_INTERNAL;
  }
}

/** Throws INVALID_ARGUMENT when a required pointer argument is NULL; `fn` (the API call's name)
 * must be in scope. */
#define METILE_CHECK_ARG(ptr)                                                  \
  do {                                                                         \
    if ((ptr) == nullptr)                                                      \
      ::metile::fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": argument `", \
                     #ptr, "` is NULL");                                       \
  } while (0)

}  // namespace metile::capi
