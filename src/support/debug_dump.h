/** \file debug_dump.h
 * The METILE_DEBUG stage dumps: a comma list of stage names, or "all" (also "1"), which further
 * dumps every other text a device keeps with its artifact. METILE_DEBUG_DIR writes files instead
 * of stderr. An unknown name is warned about once, with the list of stages.
 */
#pragma once

#include <string_view>
#include <vector>

#include "support/stage.h"

namespace metile {

/** The stages METILE_DEBUG names (every one for "all"), in pipeline order. */
std::vector<Stage> debug_stages();
/** True when METILE_DEBUG names `stage` or is "all"; any text name when "all". */
bool debug_stage_enabled(std::string_view stage);
/**
 * Dumps a stage's text when METILE_DEBUG asks for it: to METILE_DEBUG_DIR/<kernel>.<stage>.txt
 * when that is set, else to stderr with a header line.
 */
void debug_dump(std::string_view stage, std::string_view kernel, std::string_view text);

}  // namespace metile
