/** \file backends.h
 * Entry points of each backend, referenced only by the registry (registry.cpp).
 */
#pragma once

#include <memory>
#include <string>

namespace metile {

class Device;

// metal_sim/metal_sim_device.cpp
std::string metal_sim_probe();
std::shared_ptr<Device> create_metal_sim_device();

}  // namespace metile
