/** \file log.h
 * The log: METILE_LOG=error|warn|info|debug (default warn), lines on stderr.
 */
#pragma once

#include <string_view>

namespace metile {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };
bool log_enabled(LogLevel level);
/** Writes "metile: <level>: <message>" to stderr when the level is enabled. */
void log(LogLevel level, std::string_view message);
/** Logs a warning once per distinct `key` per process. */
void warn_once(std::string_view key, std::string_view message);

}  // namespace metile
