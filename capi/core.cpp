// Version, status names, the thread-local error message, dtype and op names.
#include <cstdlib>
#include <cstring>

#include "guard.h"
#include "ir/ops.h"
#include "ir/types.h"

namespace metile::capi {

namespace {
thread_local std::string last_error;
}

void set_last_error(const std::string& message) { last_error = message; }

}  // namespace metile::capi

using namespace metile;

extern "C" {

METILE_API uint32_t metile_version(void) { return METILE_VERSION_NUMBER; }

METILE_API const char* metile_version_string(void) {
#define METILE_STR2(x) #x
#define METILE_STR(x) METILE_STR2(x)
  return METILE_STR(METILE_VERSION_MAJOR) "." METILE_STR(METILE_VERSION_MINOR) "." METILE_STR(
      METILE_VERSION_PATCH);
}

METILE_API const char* metile_status_name(metile_status status) {
  switch (status) {
    case METILE_OK: return "METILE_OK";
    case METILE_ERROR_INVALID_ARGUMENT: return "METILE_ERROR_INVALID_ARGUMENT";
    case METILE_ERROR_INVALID_PROGRAM: return "METILE_ERROR_INVALID_PROGRAM";
    case METILE_ERROR_COMPILE: return "METILE_ERROR_COMPILE";
    case METILE_ERROR_UNSUPPORTED: return "METILE_ERROR_UNSUPPORTED";
    case METILE_ERROR_DEVICE_UNAVAILABLE: return "METILE_ERROR_DEVICE_UNAVAILABLE";
    case METILE_ERROR_DEVICE: return "METILE_ERROR_DEVICE";
    case METILE_ERROR_OUT_OF_MEMORY: return "METILE_ERROR_OUT_OF_MEMORY";
    case METILE_ERROR_IO: return "METILE_ERROR_IO";
    case METILE_ERROR_INTERNAL: return "METILE_ERROR_INTERNAL";
    default: return "METILE_STATUS_UNKNOWN";
  }
}

METILE_API const char* metile_last_error(void) { return capi::last_error.c_str(); }

METILE_API void metile_free(void* ptr) { std::free(ptr); }

METILE_API size_t metile_dtype_size(metile_dtype dtype) {
  if (!is_valid_dtype(dtype)) return 0;
  return dtype_size(static_cast<DType>(dtype));
}

METILE_API const char* metile_dtype_name(metile_dtype dtype) {
  if (!is_valid_dtype(dtype)) return "invalid";
  return dtype_name(static_cast<DType>(dtype));
}

METILE_API const char* metile_op_name(metile_op op) {
  if (!is_valid_op(op)) return "invalid";
  return op_info(static_cast<OpKind>(op)).name.data();
}

}  // extern "C"

// The C enum and the op table must agree value for value.
#define OP(E, name, pin, ...) static_assert(METILE_OP_##E == pin);
#include "ir/ops.def"
