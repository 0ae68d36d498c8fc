// libFuzzer target for the GPU IR text parser (src/ir/gpu_parse.cpp). Any input may be rejected
// with a metile::Error; anything else - a crash, a sanitizer report, an exception of another
// kind, or a function that does not print and parse back to the same text - is a bug. The
// verifier runs inside parse, so its checks see hostile functions too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ir/gpu_parse.h"
#include "support/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const metile::gpu::Function f = metile::gpu::parse(text);
    const std::string printed = metile::gpu::print(f);
    if (metile::gpu::print(metile::gpu::parse(printed)) != printed) __builtin_trap();
  } catch (const metile::Error& e) {
    // Parse errors; the verifier's (INTERNAL for the compiler's own IR) come back as parse errors.
    if (e.status() != METILE_ERROR_INVALID_PROGRAM) __builtin_trap();
  }
  return 0;
}
