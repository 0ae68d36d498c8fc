/** \file host_buffer.h
 * Buffers in plain host memory, for devices that execute on the host (interp, cpu, metal-sim):
 * allocations are page-aligned and zeroed; wrapped caller memory is used in place.
 */
#pragma once

#include <memory>

#include "runtime/device.h"

namespace metile {

/** `bytes` of zeroed, page-aligned memory owned by the buffer. `subsystem` names the device. */
std::shared_ptr<Buffer> alloc_host_buffer(Device* device, size_t bytes, const char* subsystem);
/** The caller's memory, used in place (shares_memory() is true); the caller keeps it alive. */
std::shared_ptr<Buffer> wrap_host_buffer(Device* device, void* host, size_t bytes);

}  // namespace metile
