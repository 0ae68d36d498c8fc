/** \file backends.h
 * Entry points of each backend, referenced only by the registry (registry.cpp).
 */
#pragma once

#include <memory>
#include <string>

namespace metile {

class Device;


}  // namespace metile
