// The interp executor's tile arithmetic: element-wise ops, broadcast, dot, reductions and scans
// (semantics: the opening comment of executor.cpp).
#include "runtime/interp/instance.h"

#include <cmath>

#include "ir/dot_precision.h"
#include "ir/reduction.h"

namespace metile::interp {

Val Instance::elementwise(const Op& op) {
  const Type& rt = type(op.result());
  const size_t n = static_cast<size_t>(rt.shape.numel());
  Val out;
  out.e.resize(n);
  const OpKind k = op.kind;
  if (k == OpKind::SELECT) {
    const Val &c = val(op.operands[0]), &a = val(op.operands[1]), &b = val(op.operands[2]);
    for (size_t i = 0; i < n; ++i) out.e[i] = at(c, i).i ? at(a, i) : at(b, i);
    if (rt.is_ptr) {
      out.region.resize(n);
      for (size_t i = 0; i < n; ++i) out.region[i] = at(c, i).i ? region_at(a, i) : region_at(b, i);
    }
    return out;
  }
  if (k == OpKind::PTR_OFFSET) {
    const Val &ptr = val(op.operands[0]), &off = val(op.operands[1]);
    out.region.resize(n);
    for (size_t i = 0; i < n; ++i) {
      out.e[i] = int_elem(static_cast<int64_t>(static_cast<uint64_t>(at(ptr, i).i) +
                                               static_cast<uint64_t>(at(off, i).i)));
      out.region[i] = region_at(ptr, i);
    }
    return out;
  }
  const Val& a = val(op.operands[0]);
  const DType d = type(op.operands[0]).dtype;
  if (k == OpKind::CAST) {
    for (size_t i = 0; i < n; ++i) out.e[i] = cast_elem(d, rt.dtype, at(a, i));
  } else if (k == OpKind::BITCAST) {
    for (size_t i = 0; i < n; ++i) out.e[i] = bitcast_elem(d, rt.dtype, at(a, i));
  } else if (has_trait(k, kUnary)) {
    for (size_t i = 0; i < n; ++i) out.e[i] = unary_elem(k, d, at(a, i));
  } else {
    const Val& b = val(op.operands[1]);
    for (size_t i = 0; i < n; ++i) out.e[i] = binary_elem(k, d, at(a, i), at(b, i));
  }
  return out;
}

Val Instance::broadcast(const Op& op) {
  const Type &st = type(op.operands[0]), &rt = type(op.result());
  const Val& src = val(op.operands[0]);
  const int64_t rows = rt.shape.rank == 2 ? rt.shape.dims[0] : 1;
  const int64_t cols = rt.shape.rank == 2 ? rt.shape.dims[1] : rt.shape.dims[0];
  // The source's (row, col) strides in its own row-major layout; 0 where it stretches. numpy
  // aligns trailing dimensions, so a 1-D source lines up with the result's columns.
  int64_t rs = 0, cs = 0;
  if (st.shape.rank == 2) {
    cs = st.shape.dims[1] == 1 ? 0 : 1;
    rs = st.shape.dims[0] == 1 ? 0 : st.shape.dims[1];
  } else if (st.shape.rank == 1) {
    cs = st.shape.dims[0] == 1 ? 0 : 1;
  }
  Val out;
  out.e.resize(static_cast<size_t>(rows * cols));
  if (rt.is_ptr) out.region.resize(out.e.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      size_t from = static_cast<size_t>(r * rs + c * cs), to = static_cast<size_t>(r * cols + c);
      out.e[to] = src.e[from];
      if (rt.is_ptr) out.region[to] = src.region[from];
    }
  return out;
}

void Instance::dot(const Op& op) {
  const Type &at_ = type(op.operands[0]), &ct = type(op.operands[2]);
  const Val &a = val(op.operands[0]), &b = val(op.operands[1]), &c = val(op.operands[2]);
  const int64_t m = at_.shape.dims[0], kk = at_.shape.dims[1], n = ct.shape.dims[1];
  Val out;
  out.e.resize(static_cast<size_t>(m * n));
  const bool fl = is_float(at_.dtype);
  // f32 inputs under "tf32" round to TF32; under "tf32x3" each splits into hi = tf32(x) and
  // lo = tf32(x - hi), and the products lo*hi, hi*lo, hi*hi are summed in that order. A TF32
  // product is exact in f32, so only the sums round, as on tensor cores. Other dtypes are
  // exact in TF32 (f16, bf16) or integers: the attribute does not concern them.
  const DotPrecision prec =
      at_.dtype == DType::f32 ? dot_precision(op, DotPrecision::ieee) : DotPrecision::ieee;
  auto hi = [&](float x) { return prec == DotPrecision::ieee ? x : round_tf32(x); };
  auto lo = [&](float x) { return round_tf32(x - round_tf32(x)); };
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t ij = static_cast<size_t>(i * n + j);
      if (fl) {
        float s = c.e[ij].f;
        for (int64_t k = 0; k < kk; ++k) {
          const float x = a.e[i * kk + k].f, y = b.e[k * n + j].f;
          if (prec == DotPrecision::tf32x3) {
            const float small1 = lo(x) * hi(y), small2 = hi(x) * lo(y);
            s += small1;
            s += small2;
          }
          // Two statements: the product is rounded before the sum, never fused into an FMA
          // (clang contracts within one expression by default).
          const float product = hi(x) * hi(y);
          s += product;
        }
        out.e[ij] = float_elem(round_float(s, ct.dtype));
      } else {
        uint64_t s = static_cast<uint64_t>(c.e[ij].i);
        for (int64_t k = 0; k < kk; ++k)
          s += static_cast<uint64_t>(a.e[i * kk + k].i * b.e[k * n + j].i);
        out.e[ij] = int_elem(wrap_int(static_cast<int64_t>(s), ct.dtype));
      }
    }
  set(op, std::move(out));
}

void Instance::reduce(const Op& op) {
  const Type& t = type(op.operands[0]);
  const Val& x = val(op.operands[0]);
  if (t.is_scalar()) {
    set(op, x);
    return;
  }
  const int64_t axis = op.attr_int("axis");
  const int64_t rows = t.shape.rank == 2 ? t.shape.dims[0] : 1;
  const int64_t cols = t.shape.rank == 2 ? t.shape.dims[1] : t.shape.dims[0];
  // `groups` results, each folding `len` elements; element l of group g sits at g*gs + l*ls.
  int64_t groups = 1, len = rows * cols, gs = 0, ls = 1;
  if (axis == 0) groups = cols, len = rows, gs = 1, ls = cols;
  if (axis == 1) groups = rows, len = cols, gs = cols, ls = 1;
  const DType d = t.dtype;
  const Reduction k = *reduction_of(op.kind);
  Val out;
  out.e.resize(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    if (is_float(d)) {
      float acc = static_cast<float>(float_identity(k));
      for (int64_t l = 0; l < len; ++l) {
        float v = x.e[g * gs + l * ls].f;
        acc = k == Reduction::sum   ? acc + v
              : k == Reduction::max ? max_number(acc, v)
                                    : min_number(acc, v);
      }
      out.e[g] = float_elem(round_float(acc, d));
    } else {
      int64_t acc = int_identity(k, d);
      for (int64_t l = 0; l < len; ++l) {
        int64_t v = x.e[g * gs + l * ls].i;
        acc = k == Reduction::sum
                  ? static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v))
              : k == Reduction::max ? std::max(acc, v)
                                    : std::min(acc, v);
      }
      out.e[g] = int_elem(wrap_int(acc, d));
    }
  }
  set(op, std::move(out));
}

void Instance::scan(const Op& op) {
  const Type& t = type(op.operands[0]);
  const Val& x = val(op.operands[0]);
  const int64_t axis = op.attr_int("axis");
  const bool reverse = op.attr_int("reverse") != 0;
  const int64_t rows = t.shape.rank == 2 ? t.shape.dims[0] : 1;
  const int64_t cols = t.shape.rank == 2 ? t.shape.dims[1] : t.shape.dims[0];
  // `lines` scans of `len` elements; element l of line g sits at g*gs + l*ls.
  int64_t lines = rows, len = cols, gs = cols, ls = 1;
  if (t.shape.rank == 2 && axis == 0) lines = cols, len = rows, gs = 1, ls = cols;
  const DType d = t.dtype;
  const bool sum = op.kind == OpKind::CUMSUM;
  Val out;
  out.e.resize(x.e.size());
  for (int64_t g = 0; g < lines; ++g) {
    float facc = sum ? 0.0f : 1.0f;
    uint64_t iacc = sum ? 0 : 1;
    for (int64_t n = 0; n < len; ++n) {
      const size_t k = static_cast<size_t>(g * gs + (reverse ? len - 1 - n : n) * ls);
      if (is_float(d)) {
        facc = sum ? facc + at(x, k).f : facc * at(x, k).f;
        out.e[k] = float_elem(round_float(facc, d));
      } else {
        const uint64_t v = static_cast<uint64_t>(at(x, k).i);
        iacc = sum ? iacc + v : iacc * v;
        out.e[k] = int_elem(wrap_int(static_cast<int64_t>(iacc), d));
      }
    }
  }
  set(op, std::move(out));
}

}  // namespace metile::interp
