// How many registers a GPU kernel's threads keep live, and the minimum of blocks per
// multiprocessor the CUDA emitter may ask for (__launch_bounds__) without making ptxas spill.
#pragma once

#include <cstdint>

#include "ir/gpu_ir.h"
#include "ir/types.h"

namespace metile {

/**
 * Floating-point registers a thread keeps live through the loop that needs most: the values the
 * loop reads from outside it (a staged operand's tile), plus the most its own values (carried
 * accumulators, loaded tiles, flash attention's scores beside its carried output) hold at once.
 * Per-thread register counts of the layouts; index math is not counted (ptxas recomputes it).
 * 0 for a function with no loop.
 */
int64_t loop_live_registers(const gpu::Function& f);

/**
 * The minimum blocks per multiprocessor for __launch_bounds__ (65536 registers each), or 0 to
 * name none. `accumulator` is the largest mma accumulator (0: no mma), `loop` the count above:
 * a matrix kernel asks for as many blocks as its accumulator plus about 64 registers allow,
 * and never more than its loop's live registers plus 32 temporaries allow.
 */
int min_blocks_per_multiprocessor(int threads, int64_t accumulator, int64_t loop);

}  // namespace metile
