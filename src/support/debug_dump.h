/** \file debug_dump.h
 * The METILE_DEBUG stage dumps: a comma list of stage names, or "all" (also "1").
 * METILE_DEBUG_DIR writes files instead of stderr.
 */
#pragma once

#include <string_view>

namespace metile {

/** True when METILE_DEBUG names `stage` (or "all"). */
bool debug_stage_enabled(std::string_view stage);
/**
 * Dumps a stage's text when METILE_DEBUG asks for it: to METILE_DEBUG_DIR/<kernel>.<stage>.txt
 * when that is set, else to stderr with a header line.
 */
void debug_dump(std::string_view stage, std::string_view kernel, std::string_view text);

}  // namespace metile
