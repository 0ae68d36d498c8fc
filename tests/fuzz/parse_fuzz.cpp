// libFuzzer target for the Tile IR text parser. Any input may be rejected with a metile::Error
// (a parse or verifier error); anything else - a crash, a sanitizer report, an internal error,
// or a program that does not print and parse back to the same text - is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ir/tile_ir.h"
#include "support/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const metile::Program p = metile::parse(text);
    const std::string printed = metile::print(p);
    if (metile::print(metile::parse(printed)) != printed) __builtin_trap();
  } catch (const metile::Error& e) {
    if (e.status() == METILE_ERROR_INTERNAL) __builtin_trap();  // an assertion inside metile
  }
  return 0;
}
