/** \file backends.h
 * Entry points of each backend, referenced only by the registry (registry.cpp): for device X,
 * probe_X_device() says "" when it can run here (else why not) and make_X_device() creates it.
 */
#pragma once

#include <memory>
#include <string>

namespace metile {

class Device;

/** interp: always available (executes Tile IR directly; src/runtime/interp). */
std::string probe_interp_device();
std::shared_ptr<Device> make_interp_device();

/** cpu: needs a host C++ compiler (src/runtime/cpu). */
std::string probe_cpu_device();
std::shared_ptr<Device> make_cpu_device();

/** cuda: needs the NVIDIA driver and NVRTC, opened with dlopen (src/runtime/cuda). */
std::string probe_cuda_device();
std::shared_ptr<Device> make_cuda_device();
/** cuda:N; METILE_ERROR_DEVICE_UNAVAILABLE naming N and the count when there is no such GPU. */
std::shared_ptr<Device> make_cuda_device_nth(int ordinal);
/** The GPUs the driver reports (after probe_cuda_device() passed). */
int cuda_device_count();

/** metal: Metal.framework and the Objective-C runtime, opened with dlopen (src/runtime/metal). */
std::string probe_metal_device();
std::shared_ptr<Device> make_metal_device();

/** metal-sim: needs clang >= 15 and an x86-64 or arm64 host (src/runtime/metal_sim). */
std::string probe_metal_sim_device();
std::shared_ptr<Device> make_metal_sim_device();

}  // namespace metile
