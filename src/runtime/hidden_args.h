/** \file hidden_args.h
 * Passing the parameters the Tile IR passes append after the user's (TileHiddenArgs): buffer
 * extents and the check_bounds error flag. One wrapper around every device's kernel, so the
 * launch marshalling stays the same for all devices.
 */
#pragma once

#include <memory>

#include "passes/tile/tile_pass.h"
#include "runtime/device.h"

namespace metile {

/**
 * `inner` runs `lowered` (the user's program plus the hidden parameters); the result takes the
 * user's arguments, appends the hidden ones at every launch and, with an error flag, fails with
 * METILE_ERROR_DEVICE naming the access's source location after a launch that went out of
 * bounds (it synchronizes the device). `inner` itself when there is nothing hidden.
 */
std::shared_ptr<Kernel> with_hidden_args(std::shared_ptr<Kernel> inner,
                                         std::shared_ptr<const Program> lowered,
                                         TileHiddenArgs hidden, std::shared_ptr<Device> device);

}  // namespace metile
