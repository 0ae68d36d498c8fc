/** \file gpu_parse.h
 * Reading the GPU IR's text form (what gpu::print writes) back into a Function, so passes can be
 * tested text in, text out and a dump (METILE_DEBUG=gpu_ir) can be fed back to the compiler.
 */
#pragma once

#include <string_view>

#include "ir/gpu_ir.h"

namespace metile::gpu {

/**
 * Parses one `gpu_kernel @name(...) threads=N simd=W { ... }` and verifies it. print(parse(t))
 * == t for every t that print wrote. Any other text is rejected with METILE_ERROR_INVALID_PROGRAM
 * "[gpu-parse] line L:C: ..." naming what was expected there (for a function that parses but
 * does not verify, the line of the op the verifier refused); source locations (Op::loc) are not
 * part of the text and come back empty.
 */
Function parse(std::string_view text);

}  // namespace metile::gpu
