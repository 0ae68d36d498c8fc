// metile_builder_*: thin conversions onto metile::Builder.
#include "guard.h"
#include "handles.h"

using namespace metile;
using capi::get;
using capi::guard;

namespace {

// The builder behind `b`, held for the rest of the calling expression (use it as `B(b, fn)->`).
struct HeldBuilder {
  capi::Ref<metile_builder> handle;
  Builder* operator->() const { return handle->impl.get(); }
  Builder& operator*() const { return *handle->impl; }
};

HeldBuilder B(metile_builder* b, const char* fn) {
  auto h = get(b, fn);
  if (!h->impl)
    fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": the builder was already finished");
  return {std::move(h)};
}

// threads_ok: a dimension may be -1, T (the SIMT thread count) while the builder has not fixed it.
Shape shape_of(int32_t rank, const int64_t* dims, const char* fn, bool threads_ok = false) {
  if (rank < 0 || rank > 2) fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": rank must be 0, 1 or 2");
  if (rank > 0) METILE_CHECK_ARG(dims);
  Shape s;
  s.rank = rank;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] <= 0 && !(threads_ok && dims[i] == kThreadsDim))
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": shape dimensions must be positive",
           threads_ok ? " (or -1 for the thread count T)" : "");
    s.dims[i] = dims[i];
  }
  return s;
}

OpKind op_of(metile_op op, const char* fn) {
  if (!is_valid_op(op)) fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": unknown op ", static_cast<int>(op));
  return static_cast<OpKind>(op);
}

DType dtype_of(metile_dtype d, const char* fn) {
  if (!is_valid_dtype(d)) fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": invalid dtype ", static_cast<int>(d));
  return static_cast<DType>(d);
}

}  // namespace

#define OUT(v)          \
  METILE_CHECK_ARG(out); \
  *out = (v)

extern "C" {

METILE_API metile_status metile_builder_create(metile_builder** out, const char* name) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    METILE_CHECK_ARG(name);
    auto impl = std::make_unique<Builder>(name);
    auto h = capi::make_handle<metile_builder>();
    h->impl = std::move(impl);
    *out = capi::publish(h);
  });
}

METILE_API metile_status metile_builder_release(metile_builder* b) {
  return guard(__func__, [&](const char* fn) { capi::release(b, fn); });
}

METILE_API metile_status metile_builder_set_loc(metile_builder* b, const char* file, int32_t line) {
  return guard(__func__, [&](const char* fn) { B(b, fn)->set_loc(file ? file : "", line); });
}

METILE_API metile_status metile_builder_set_constexpr(metile_builder* b, const char* name,
                                                      const char* value) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(name);
    METILE_CHECK_ARG(value);
    B(b, fn)->set_constexpr(name, value);
  });
}

METILE_API metile_status metile_builder_set_num_threads(metile_builder* b, int32_t n) {
  return guard(__func__, [&](const char* fn) { B(b, fn)->set_num_threads(n); });
}

METILE_API metile_status metile_builder_param(metile_builder* b, const char* name,
                                              const metile_type* type, metile_value* out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(name);
    METILE_CHECK_ARG(type);
    auto bb = B(b, fn);
    if (type->rank != 0)
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": parameter ", name,
           " must be a scalar or pointer (rank 0)");
    // Validated here, before from_c_type() narrows the C enums into the IR's types.
    dtype_of(type->dtype, fn);
    if (type->address_space != METILE_ADDRESS_SPACE_DEVICE &&
        type->address_space != METILE_ADDRESS_SPACE_THREADGROUP)
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": parameter ", name,
           " has an unknown address space ", static_cast<int>(type->address_space));
    OUT(bb->param(name, from_c_type(*type)));
  });
}

METILE_API metile_status metile_builder_value_type(const metile_builder* b, metile_value v,
                                                   metile_type* out) {
  return guard(__func__, [&](const char* fn) {
    auto bb = B(const_cast<metile_builder*>(b), fn);
    OUT(to_c_type(bb->type(v)));
  });
}

METILE_API metile_status metile_builder_const_int(metile_builder* b, metile_dtype dtype,
                                                  int64_t value, metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->const_int(dtype_of(dtype, fn), value)); });
}

METILE_API metile_status metile_builder_const_float(metile_builder* b, metile_dtype dtype,
                                                    double value, metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->const_float(dtype_of(dtype, fn), value)); });
}

METILE_API metile_status metile_builder_grid(metile_builder* b, metile_op op, int32_t axis,
                                             metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->grid(op_of(op, fn), axis)); });
}

METILE_API metile_status metile_builder_arange(metile_builder* b, metile_value start, int64_t size,
                                               metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->arange(start, size)); });
}

METILE_API metile_status metile_builder_cast(metile_builder* b, metile_value x, metile_dtype dtype,
                                             metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->cast(x, dtype_of(dtype, fn))); });
}

METILE_API metile_status metile_builder_bitcast(metile_builder* b, metile_value x, metile_dtype dtype,
                                                metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->bitcast(x, dtype_of(dtype, fn))); });
}

METILE_API metile_status metile_builder_broadcast(metile_builder* b, metile_value x, int32_t rank,
                                                  const int64_t* shape, metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->broadcast(x, shape_of(rank, shape, fn, true))); });
}

METILE_API metile_status metile_builder_reshape(metile_builder* b, metile_value x, int32_t rank,
                                                const int64_t* shape, metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->reshape(x, shape_of(rank, shape, fn))); });
}

METILE_API metile_status metile_builder_unary(metile_builder* b, metile_op op, metile_value x,
                                              metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->unary(op_of(op, fn), x)); });
}

METILE_API metile_status metile_builder_binary(metile_builder* b, metile_op op, metile_value x,
                                               metile_value y, metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->binary(op_of(op, fn), x, y)); });
}

METILE_API metile_status metile_builder_select(metile_builder* b, metile_value c, metile_value x,
                                               metile_value y, metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->select(c, x, y)); });
}

METILE_API metile_status metile_builder_ptr_offset(metile_builder* b, metile_value ptr,
                                                   metile_value offsets, metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->ptr_offset(ptr, offsets)); });
}

METILE_API metile_status metile_builder_load(metile_builder* b, metile_value ptrs,
                                             metile_value mask, metile_value other,
                                             metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->load(ptrs, mask, other)); });
}

METILE_API metile_status metile_builder_store(metile_builder* b, metile_value ptrs,
                                              metile_value value, metile_value mask) {
  return guard(__func__, [&](const char* fn) { B(b, fn)->store(ptrs, value, mask); });
}

METILE_API metile_status metile_builder_atomic(metile_builder* b, metile_op op, metile_value ptrs,
                                               metile_value cmp, metile_value value,
                                               metile_value mask, metile_value* out) {
  return guard(__func__, [&](const char* fn) {
    OUT(B(b, fn)->atomic(op_of(op, fn), ptrs, cmp, value, mask));
  });
}

METILE_API metile_status metile_builder_tile_load(metile_builder* b, metile_value ptr,
                                                  metile_value row, metile_value col,
                                                  metile_value stride, int64_t rows, int64_t cols,
                                                  metile_value bound_rows, metile_value bound_cols,
                                                  metile_value* out) {
  return guard(__func__, [&](const char* fn) {
    int64_t dims[2] = {rows, cols};
    OUT(B(b, fn)->tile_load(ptr, row, col, stride, shape_of(2, dims, fn), bound_rows,
                                 bound_cols));
  });
}

METILE_API metile_status metile_builder_tile_store(metile_builder* b, metile_value ptr,
                                                   metile_value row, metile_value col,
                                                   metile_value stride, metile_value value,
                                                   metile_value bound_rows,
                                                   metile_value bound_cols) {
  return guard(__func__, [&](const char* fn) { B(b, fn)->tile_store(ptr, row, col, stride, value, bound_rows, bound_cols); });
}

METILE_API metile_status metile_builder_dot(metile_builder* b, metile_value a, metile_value bm,
                                            metile_value acc, metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->dot(a, bm, acc)); });
}

METILE_API metile_status metile_builder_dot_with_precision(metile_builder* b, metile_value a,
                                                           metile_value bm, metile_value acc,
                                                           metile_dot_precision precision,
                                                           metile_value* out) {
  return guard(__func__, [&](const char* fn) {
    const int p = static_cast<int>(precision);
    if (p < METILE_DOT_PRECISION_DEFAULT || p > METILE_DOT_PRECISION_TF32X3)
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": precision ", p,
           " is not a metile_dot_precision (0 = default, 1 = ieee, 2 = tf32, 3 = tf32x3)");
    OUT(B(b, fn)->dot(a, bm, acc, static_cast<DotPrecision>(p)));
  });
}

METILE_API metile_status metile_builder_reduce(metile_builder* b, metile_op op, metile_value x,
                                               int32_t axis, metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->reduce(op_of(op, fn), x, axis)); });
}

METILE_API metile_status metile_builder_scan(metile_builder* b, metile_op op, metile_value x,
                                             int32_t axis, int32_t reverse, metile_value* out) {
  return guard(__func__, [&](const char* fn) {
    if (reverse != 0 && reverse != 1)
      fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": reverse must be 0 or 1, got ", reverse);
    OUT(B(b, fn)->scan(op_of(op, fn), x, axis, reverse == 1));
  });
}

METILE_API metile_status metile_builder_trans(metile_builder* b, metile_value x, metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->trans(x)); });
}

METILE_API metile_status metile_builder_device_print(metile_builder* b, const char* prefix,
                                                     const metile_value* values, size_t n) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(prefix);
    if (n > 0) METILE_CHECK_ARG(values);
    B(b, fn)->device_print(prefix, std::vector<ValueId>(values, values + n));
  });
}

METILE_API metile_status metile_builder_for_begin(metile_builder* b, metile_value start,
                                                  metile_value end, metile_value step,
                                                  const metile_value* inits, size_t n,
                                                  metile_value* out_iv,
                                                  metile_value* out_carried) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out_iv);
    if (n > 0) {
      METILE_CHECK_ARG(inits);
      METILE_CHECK_ARG(out_carried);
    }
    auto [iv, carried] =
        B(b, fn)->for_begin(start, end, step, std::vector<ValueId>(inits, inits + n));
    *out_iv = iv;
    for (size_t i = 0; i < n; ++i) out_carried[i] = carried[i];
  });
}

METILE_API metile_status metile_builder_for_end(metile_builder* b, const metile_value* yields,
                                                size_t n, metile_value* out_results) {
  return guard(__func__, [&](const char* fn) {
    if (n > 0) {
      METILE_CHECK_ARG(yields);
      METILE_CHECK_ARG(out_results);
    }
    auto r = B(b, fn)->for_end(std::vector<ValueId>(yields, yields + n));
    for (size_t i = 0; i < n; ++i) out_results[i] = r[i];
  });
}

METILE_API metile_status metile_builder_if_begin(metile_builder* b, metile_value cond) {
  return guard(__func__, [&](const char* fn) { B(b, fn)->if_begin(cond); });
}

METILE_API metile_status metile_builder_if_else(metile_builder* b, const metile_value* yields,
                                                size_t n) {
  return guard(__func__, [&](const char* fn) {
    if (n > 0) METILE_CHECK_ARG(yields);
    B(b, fn)->if_else(std::vector<ValueId>(yields, yields + n));
  });
}

METILE_API metile_status metile_builder_if_end(metile_builder* b, const metile_value* yields,
                                               size_t n, metile_value* out_results) {
  return guard(__func__, [&](const char* fn) {
    if (n > 0) {
      METILE_CHECK_ARG(yields);
      METILE_CHECK_ARG(out_results);
    }
    auto r = B(b, fn)->if_end(std::vector<ValueId>(yields, yields + n));
    for (size_t i = 0; i < n; ++i) out_results[i] = r[i];
  });
}

METILE_API metile_status metile_builder_while_begin(metile_builder* b, const metile_value* inits,
                                                    size_t n, metile_value* out_carried) {
  return guard(__func__, [&](const char* fn) {
    if (n > 0) {
      METILE_CHECK_ARG(inits);
      METILE_CHECK_ARG(out_carried);
    }
    auto r = B(b, fn)->while_begin(std::vector<ValueId>(inits, inits + n));
    for (size_t i = 0; i < n; ++i) out_carried[i] = r[i];
  });
}

METILE_API metile_status metile_builder_while_do(metile_builder* b, metile_value cond,
                                                 const metile_value* values, size_t n,
                                                 metile_value* out_args) {
  return guard(__func__, [&](const char* fn) {
    if (n > 0) {
      METILE_CHECK_ARG(values);
      METILE_CHECK_ARG(out_args);
    }
    auto r = B(b, fn)->while_do(cond, std::vector<ValueId>(values, values + n));
    for (size_t i = 0; i < n; ++i) out_args[i] = r[i];
  });
}

METILE_API metile_status metile_builder_while_end(metile_builder* b, const metile_value* yields,
                                                  size_t n, metile_value* out_results) {
  return guard(__func__, [&](const char* fn) {
    if (n > 0) {
      METILE_CHECK_ARG(yields);
      METILE_CHECK_ARG(out_results);
    }
    auto r = B(b, fn)->while_end(std::vector<ValueId>(yields, yields + n));
    for (size_t i = 0; i < n; ++i) out_results[i] = r[i];
  });
}

METILE_API metile_status metile_builder_role_begin(metile_builder* b, int32_t role,
                                                   int32_t num_roles, int32_t first_sg,
                                                   int32_t num_sgs) {
  return guard(__func__, [&](const char* fn) { B(b, fn)->role_begin(role, num_roles, first_sg, num_sgs); });
}

METILE_API metile_status metile_builder_role_end(metile_builder* b) {
  return guard(__func__, [&](const char* fn) { B(b, fn)->role_end(); });
}

METILE_API metile_status metile_builder_simt(metile_builder* b, metile_op op, metile_value* out) {
  return guard(__func__, [&](const char* fn) {
    ValueId v = B(b, fn)->simt(op_of(op, fn));
    if (out) *out = v;
    else if (v != kNoValue) METILE_CHECK_ARG(out);
  });
}

METILE_API metile_status metile_builder_simd(metile_builder* b, metile_op op, metile_value x,
                                             metile_value lane_or_mask, metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->simd(op_of(op, fn), x, lane_or_mask)); });
}

METILE_API metile_status metile_builder_shared(metile_builder* b, int64_t size, metile_dtype dtype,
                                               metile_value* out) {
  return guard(__func__, [&](const char* fn) { OUT(B(b, fn)->shared(size, dtype_of(dtype, fn))); });
}

METILE_API metile_status metile_builder_tile_swizzle(metile_builder* b, metile_value pid_m,
                                                     metile_value pid_n, const char* pattern,
                                                     int32_t block_size, metile_value* out_m,
                                                     metile_value* out_n) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(pattern);
    METILE_CHECK_ARG(out_m);
    METILE_CHECK_ARG(out_n);
    auto [m, n] = B(b, fn)->tile_swizzle(pid_m, pid_n, pattern, block_size);
    *out_m = m;
    *out_n = n;
  });
}

METILE_API metile_status metile_builder_finish(metile_builder* b, metile_program** out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    auto bb = B(b, fn);
    auto prog = std::make_shared<const Program>(bb->finish());
    auto h = capi::make_handle<metile_program>();
    h->impl = std::move(prog);
    *out = capi::publish(h);
  });
}

}  // extern "C"
