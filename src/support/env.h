/** \file env.h
 * Environment variables and the log: METILE_LOG=error|warn|info|debug (default warn) and the
 * METILE_DEBUG stage dumps (comma list of stage names or "all"; METILE_DEBUG_DIR writes files).
 */
#pragma once

#include <string>
#include <string_view>

namespace metile {

/** The variable's value, or `fallback` when unset or empty. */
std::string env_string(const char* name, std::string_view fallback = {});
/** Parses an integer variable; `fallback` when unset, empty or not a number. */
long long env_int(const char* name, long long fallback);

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };
bool log_enabled(LogLevel level);
/** Writes "metile: <level>: <message>" to stderr when the level is enabled. */
void log(LogLevel level, std::string_view message);
/** Logs a warning once per distinct `key` per process. */
void warn_once(std::string_view key, std::string_view message);

/** True when METILE_DEBUG names `stage` (or "all"). */
bool debug_stage_enabled(std::string_view stage);
/**
 * Dumps a stage's text when METILE_DEBUG asks for it: to METILE_DEBUG_DIR/<kernel>.<stage>.txt
 * when that is set, else to stderr with a header line.
 */
void debug_dump(std::string_view stage, std::string_view kernel, std::string_view text);

}  // namespace metile
