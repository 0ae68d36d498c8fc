/** \file backends.h
 * Entry points of each backend, referenced only by the registry (registry.cpp).
 */
#pragma once

#include <memory>
#include <string>

namespace metile {

class Device;

/** interp: always available (executes Tile IR directly; src/runtime/interp). */
std::string probe_interp_device();
std::shared_ptr<Device> make_interp_device();

}  // namespace metile
