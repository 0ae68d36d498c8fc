/** \file executor.h
 * The Tile IR executor behind the interp device: runs every program instance of a launch
 * directly on the IR, with the semantics written down at the top of executor.cpp.
 */
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/device.h"

namespace metile::interp {

/** Threadgroup memory of the interp device; shared() allocations must fit in it. */
inline constexpr uint64_t kThreadgroupMemoryBytes = 65536;
/** Largest SIMT thread count the interp device accepts. */
inline constexpr int kMaxThreads = 1024;

/**
 * Checks what the interp device supports (thread count, threadgroup memory); throws
 * METILE_ERROR_UNSUPPORTED naming the op and its location.
 */
void check_supported(const Program& program);

/**
 * Runs every program instance of the launch; returns when all have finished. A failing instance
 * throws METILE_ERROR_DEVICE; with several, the first in grid order (x fastest) is reported.
 */
void execute(const Program& program, const Grid& grid, const std::vector<LaunchArg>& args);

}  // namespace metile::interp
