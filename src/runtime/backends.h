/** \file backends.h
 * Entry points of each backend, referenced only by the registry (registry.cpp).
 */
#pragma once

#include <memory>
#include <string>

namespace metile {

class Device;

/** cpu (runtime/cpu): "" when a host C++ compiler is available, else why not. */
std::string cpu_probe();
std::shared_ptr<Device> cpu_create();

/** interp: always available (executes Tile IR directly; src/runtime/interp). */
std::string probe_interp_device();
std::shared_ptr<Device> make_interp_device();

/** cuda: needs the NVIDIA driver and NVRTC, opened with dlopen (src/runtime/cuda). */
std::string probe_cuda_device();
std::shared_ptr<Device> make_cuda_device();

/** metal: Metal.framework and the Objective-C runtime, opened with dlopen (src/runtime/metal). */
std::string probe_metal_device();
std::shared_ptr<Device> make_metal_device();

/** metal-sim: needs clang >= 15 and an x86-64 or arm64 host (src/runtime/metal_sim). */
std::string probe_metal_sim_device();
std::shared_ptr<Device> make_metal_sim_device();

}  // namespace metile
