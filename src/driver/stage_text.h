/** \file stage_text.h
 * The text of any compile stage for any program, whichever device it runs on: METILE_DEBUG=msl
 * shows the MSL a kernel becomes even when it runs on cpu. Emits text only; no toolchain runs.
 */
#pragma once

#include <string>

#include "ir/tile_ir.h"
#include "runtime/device.h"
#include "support/debug_dump.h"

namespace metile {

/**
 * The text of `stage` for `program`: tile_ir is the printed program; gpu_ir and gpu_ir_opt are
 * the GPU pipeline's output for the Apple GPU target; msl and cuda the emitted kernels; cpp the
 * cpu backend's C++. Throws the pipeline's error when the program cannot take that path.
 */
std::string stage_text(Stage stage, const Program& program, const CompileOptions& options);

}  // namespace metile
