// metile_program_*: parse, print and inspect verified programs.
#include "guard.h"
#include "handles.h"
#include "ir/param_access.h"
#include "out_string.h"

using namespace metile;
using capi::get;
using capi::guard;

extern "C" {

METILE_API metile_status metile_program_parse(metile_program** out, const char* text) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    METILE_CHECK_ARG(text);
    auto prog = std::make_shared<const Program>(parse(text));
    auto h = capi::make_handle<metile_program>();
    h->impl = std::move(prog);
    *out = capi::publish(h);
  });
}

METILE_API metile_status metile_program_print(const metile_program* p, char** out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    *out = capi::dup_string(print(*get(p, fn)->impl));
  });
}

METILE_API metile_status metile_program_retain(metile_program* p) {
  return guard(__func__, [&](const char* fn) { capi::retain(p, fn); });
}

METILE_API metile_status metile_program_release(metile_program* p) {
  return guard(__func__, [&](const char* fn) { capi::release(p, fn); });
}

METILE_API const char* metile_program_name(const metile_program* p) {
  const char* name = nullptr;
  guard(__func__, [&](const char* fn) { name = get(p, fn)->impl->name.c_str(); });
  return name;
}

METILE_API metile_status metile_program_num_params(const metile_program* p, size_t* out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    *out = get(p, fn)->impl->params.size();
  });
}

METILE_API metile_status metile_program_param(const metile_program* p, size_t index,
                                              const char** out_name, metile_type* out_type) {
  return guard(__func__, [&](const char* fn) {
    auto ph = get(p, fn);
    const Program& prog = *ph->impl;
    if (index >= prog.params.size())
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": index ", index, " out of range (",
           prog.params.size(), " parameters)");
    if (out_name) *out_name = prog.params[index].name.c_str();
    if (out_type) *out_type = to_c_type(prog.type(prog.params[index].value));
  });
}

METILE_API metile_status metile_program_param_access(const metile_program* p, size_t index,
                                                     uint32_t* out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    const Program& prog = *get(p, fn)->impl;
    if (index >= prog.params.size())
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": index ", index, " out of range (",
           prog.params.size(), " parameters)");
    ValueId v = prog.params[index].value;
    uint32_t bits = 0;
    if (prog.type(v).is_ptr) {
      ParamAccess access = param_access(prog);
      if (access.read.count(v)) bits |= METILE_PARAM_READ;
      if (access.written.count(v)) bits |= METILE_PARAM_WRITE;
    }
    *out = bits;
  });
}

}  // extern "C"
