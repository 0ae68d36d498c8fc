/** \file checked.h
 * Overflow-checked sizes for the C API's memory descriptions (buffer_wrap, DLPack): every product
 * and every address range a caller hands in is checked here, and a refusal names the field.
 */
#pragma once

#include <cstdint>

#include "support/error.h"

namespace metile::capi {

/** a * b; INVALID_ARGUMENT naming `fn` and `field` when it does not fit 64 bits. */
inline uint64_t checked_mul(uint64_t a, uint64_t b, const char* fn, const char* field) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": ", field, " overflows 64 bits (", a, " * ", b,
         ")");
  return r;
}

/** a + b; INVALID_ARGUMENT naming `fn` and `field` when it does not fit 64 bits. */
inline uint64_t checked_add(uint64_t a, uint64_t b, const char* fn, const char* field) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": ", field, " overflows 64 bits (", a, " + ", b,
         ")");
  return r;
}

/**
 * Refuses `bytes` at `address` unless the range is one C object could span: at most PTRDIFF_MAX
 * bytes, ending inside the address space. `field` names what described the range.
 */
inline void check_address_range(uintptr_t address, uint64_t bytes, const char* fn,
                                const char* field) {
  uintptr_t end;
  if (bytes > static_cast<uint64_t>(PTRDIFF_MAX) || __builtin_add_overflow(address, bytes, &end))
    fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": ", field, " (", bytes, " bytes at 0x",
         std::hex, address, std::dec, ") runs past the end of the address space");
}

}  // namespace metile::capi
