/** \file metal_shim_matrix.h
 * simdgroup_matrix for metal_shim.h (which includes it; it is not usable alone): 8x8 float and
 * half matrices spread over the 32 lanes of a simdgroup, two elements per lane.
 */
#pragma once

namespace metal {

// ---- simdgroup matrices ----------------------------------------------------------------------
// An 8x8 matrix spread over the 32 lanes, two horizontally adjacent elements per lane. The lane
// layout is Apple's, which Apple does not document; it is the one MLX's GEMM relies on
// (mlx/backend/metal/kernels/steel/gemm/mma.h: qid = lane/4, row = (qid & 4) + (lane/2) % 4,
// col = (qid & 2) * 2 + (lane % 2) * 2) and that metal-flash-attention's
// simdgroup_matrix_internals.hpp derives from Apple patent US11256518B2; metile-spec §8.6 states
// the same bit mapping: lane bit 0 -> column bit 1, bits 1-2 -> row bits 0-1, bit 3 -> column
// bit 2, bit 4 -> row bit 2.

namespace detail {
inline uint fragment_row(uint lane) { return ((lane & 7u) >> 1) | ((lane >> 4) << 2); }
inline uint fragment_col(uint lane) { return ((lane & 1u) << 1) | ((lane & 8u) >> 1); }
/** The lane holding element (row, col); it is that lane's element col % 2. */
inline uint fragment_lane(uint row, uint col) {
  return ((row & 3u) << 1) | ((row >> 2) << 4) | ((col >> 1) & 1u) | (((col >> 2) & 1u) << 3);
}
/** matrix_origin: MSL takes a ulong2 (x = column, y = row); 0 is accepted for the origin. */
struct matrix_origin {
  ulong x = 0, y = 0;
  matrix_origin(int zero = 0) : x(ulong(zero)), y(ulong(zero)) {}
  template <typename V, when<is_vector<V>> = 0>
  matrix_origin(V v) : x(ulong(v[0])), y(ulong(v[1])) {}
};
}  // namespace detail

template <typename T, int Cols, int Rows>
struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "metal-sim implements 8x8 simdgroup matrices");
  static_assert(detail::same<T, float> || detail::same<T, half>,
                "metal-sim implements float and half simdgroup matrices");
  vec<T, 2> elements;

  simdgroup_matrix() = default;
  /** MSL's diagonal constructor: `value` on the diagonal, zero elsewhere. */
  explicit simdgroup_matrix(T value) {
    uint lane = detail::lane_of(detail::current);
    uint r = detail::fragment_row(lane), c = detail::fragment_col(lane);
    elements = vec<T, 2>{r == c ? value : T(0), r == c + 1 ? value : T(0)};
  }
  vec<T, 2>& thread_elements() { return elements; }
  const vec<T, 2>& thread_elements() const { return elements; }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;

template <typename T, int C, int R>
inline simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T value) {
  simdgroup_matrix<T, C, R> m;
  m.elements = vec<T, 2>{value, value};
  return m;
}

template <typename T, int C, int R>
inline void simdgroup_load(simdgroup_matrix<T, C, R>& d, const T* src, ulong elements_per_row = C,
                           detail::matrix_origin origin = 0, bool transpose = false) {
  uint lane = detail::lane_of(detail::current);
  uint r = detail::fragment_row(lane), c = detail::fragment_col(lane);
  src += origin.y * elements_per_row + origin.x;
  for (uint j = 0; j < 2; ++j)
    d.elements[j] =
        transpose ? src[(c + j) * elements_per_row + r] : src[r * elements_per_row + c + j];
}

template <typename T, int C, int R>
inline void simdgroup_store(const simdgroup_matrix<T, C, R>& m, T* dst, ulong elements_per_row = C,
                            detail::matrix_origin origin = 0, bool transpose = false) {
  uint lane = detail::lane_of(detail::current);
  uint r = detail::fragment_row(lane), c = detail::fragment_col(lane);
  dst += origin.y * elements_per_row + origin.x;
  for (uint j = 0; j < 2; ++j)
    (transpose ? dst[(c + j) * elements_per_row + r] : dst[r * elements_per_row + c + j]) =
        m.elements[j];
}

/** d = a * b + c; products and sums in float (fused, k ascending), rounded once into d. */
template <typename TD, typename TA, typename TB, typename TC>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<TD, 8, 8>& d,
                                          const simdgroup_matrix<TA, 8, 8>& a,
                                          const simdgroup_matrix<TB, 8, 8>& b,
                                          const simdgroup_matrix<TC, 8, 8>& c, METAL_SIM_SITE) {
  struct operands {
    vec<TA, 2> a;
    vec<TB, 2> b;
  };
  vec<TC, 2> acc = c.elements;  // read before d is written: d may alias c
  auto l = detail::exchange(operands{a.elements, b.elements}, "simdgroup_multiply_accumulate",
                            line, column);
  uint row = detail::fragment_row(l.self()), col = detail::fragment_col(l.self());
  vec<TD, 2> out;
  for (uint j = 0; j < 2; ++j) {
    float s = float(acc[j]);
    for (uint k = 0; k < 8; ++k) {
      float x = float(l[detail::fragment_lane(row, k)].a[k & 1u]);
      float y = float(l[detail::fragment_lane(k, col + j)].b[(col + j) & 1u]);
      s = __builtin_fmaf(x, y, s);
    }
    out[j] = TD(s);
  }
  d.elements = out;
}

template <typename TD, typename TA, typename TB>
inline void simdgroup_multiply(simdgroup_matrix<TD, 8, 8>& d, const simdgroup_matrix<TA, 8, 8>& a,
                               const simdgroup_matrix<TB, 8, 8>& b, METAL_SIM_SITE) {
  simdgroup_multiply_accumulate(d, a, b, make_filled_simdgroup_matrix<TD, 8, 8>(TD(0)), line,
                                column);
}

}  // namespace metal
