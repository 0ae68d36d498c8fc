/** \file env.h
 * Reading environment variables (METILE_*). The log is support/log.h; the METILE_DEBUG stage
 * dumps are support/debug_dump.h.
 */
#pragma once

#include <string>
#include <string_view>

namespace metile {

/** The variable's value, or `fallback` when unset or empty. */
std::string env_string(const char* name, std::string_view fallback = {});
/** Parses an integer variable; `fallback` when unset, empty or not a number. */
long long env_int(const char* name, long long fallback);

}  // namespace metile
