/** \file embedded.h
 * Files embedded into the library at build time (src/codegen/prelude/ and each dialect's
 * src/codegen/<dialect>/prelude/: device preludes and the Metal shim header), so a kernel compile
 * never depends on the source tree being present.
 */
#pragma once

#include <cstddef>
#include <string_view>

namespace metile {

struct EmbeddedFile {
  const char* name;  // path relative to src/codegen/prelude, else the file name
  const char* data;
  size_t size;
};

/** Terminated by an entry whose name is nullptr. */
extern const EmbeddedFile kEmbeddedFiles[];
/** The sha256 (hex) of the library version and every compiler source file. */
extern const char kBuildIdentity[];

/** The embedded file's contents; throws METILE_ERROR_INTERNAL when it is missing. */
std::string_view embedded_file(std::string_view name);

}  // namespace metile
