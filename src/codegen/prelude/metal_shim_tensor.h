/** \file metal_shim_tensor.h
 * The subset of Metal 4 tensors (<metal_tensor>) and MetalPerformancePrimitives' tensor_ops that
 * metile's MSL uses, for metal_shim.h (which includes it; it is not usable alone): inline
 * tensors of rank 2 over a pointer with extents and strides, and mpp::tensor_ops::matmul2d run by
 * one simdgroup (execution_simdgroup) into a cooperative destination tensor that loads from and
 * stores to such a tensor. Spellings follow Apple's headers (MPPTensorOpsMatMul2d.h: the
 * matmul2d_descriptor constructor (m, n, k = dynamic_extent, transpose_left, transpose_right,
 * relaxed_precision, mode), run(left, right, destination), get_destination_cooperative_tensor<
 * Left, Right, Element>()); a tensor's extent(0) is its innermost (column) dimension and its
 * strides are elements, {1, row stride} for a row-major matrix.
 *
 * The layout of a cooperative tensor's elements over the lanes is implementation-defined on
 * Apple's GPUs; here element i of lane l is element l + 32 * i of the m x n destination in row
 * order. Code that does not depend on the layout (load, run, store) behaves as on the GPU.
 * Products and sums are exact-f32 FMAs, k ascending (what relaxed_precision = false allows).
 */
#pragma once

namespace metal {

constexpr size_t dynamic_extent = size_t(-1);

/** A fixed-size array: what MSL's metal::array is for the tensor constructors' strides. */
template <typename T, size_t N>
struct array {
  T elements[N];
  T& operator[](size_t i) { return elements[i]; }
  const T& operator[](size_t i) const { return elements[i]; }
};

/** dextents<I, R>: R extents known at run time, innermost first. */
template <typename I, size_t Rank>
struct dextents {
  I values[Rank];
  template <typename... E>
  dextents(E... e) : values{I(e)...} {
    static_assert(sizeof...(E) == Rank, "dextents takes one extent per dimension");
  }
  I extent(size_t r) const { return values[r]; }
  static constexpr size_t rank() { return Rank; }
};

struct tensor_inline {};
struct tensor_handle {};

template <typename T, typename Extents, typename Kind = tensor_handle>
struct tensor {
  static_assert(detail::same<Kind, tensor_inline>, "metal-sim implements tensor_inline tensors");
};

/** A non-owning view: element (x0, x1, ...) is data[x0 * strides[0] + x1 * strides[1] + ...]. */
template <typename T, typename I, size_t Rank>
struct tensor<T, dextents<I, Rank>, tensor_inline> {
  using element_type = T;
  using index_type = I;
  T* data;
  dextents<I, Rank> ext;
  array<I, Rank> strides;

  tensor(T* p, dextents<I, Rank> e) : data(p), ext(e) {  // packed: innermost dimension first
    I s = 1;
    for (size_t r = 0; r < Rank; ++r) {
      strides[r] = s;
      s *= e.extent(r);
    }
  }
  tensor(T* p, dextents<I, Rank> e, array<I, Rank> s) : data(p), ext(e), strides(s) {}
  const dextents<I, Rank>& extents() const { return ext; }
  I get_extent(size_t r) const { return ext.extent(r); }
  /** Element (x, y) of a rank-2 tensor (x the column), nullptr outside the extents. */
  T* at(I x, I y) const {
    static_assert(Rank == 2, "metal-sim indexes rank-2 tensors");
    if (x < 0 || y < 0 || x >= ext.extent(0) || y >= ext.extent(1)) return nullptr;
    return data + x * strides[0] + y * strides[1];
  }
};

struct execution_thread {};
struct execution_simdgroup {};
template <int N>
struct execution_simdgroups {};

/**
 * The destination of a matmul2d over M x N, spread over the 32 lanes of a simdgroup:
 * get_capacity() elements per lane, element i of this lane at row-order index lane + 32 * i.
 */
template <typename T, int M, int N>
struct cooperative_tensor {
  static constexpr int capacity = (M * N + 31) / 32;
  T elements[capacity];

  static int index(int i) { return int(detail::lane_of(detail::current)) + 32 * i; }
  uint16_t get_capacity() const { return uint16_t(capacity); }
  bool is_valid_element(int i) const { return index(i) < M * N; }
  T& operator[](int i) { return elements[i]; }
  const T& operator[](int i) const { return elements[i]; }

  /** Loads this lane's elements; those outside the source's extents become 0. */
  template <typename S, typename E>
  void load(const tensor<S, E, tensor_inline>& src) {
    for (int i = 0; i < capacity; ++i) {
      int e = index(i);
      const S* p = e < M * N ? src.at(e % N, e / N) : nullptr;
      elements[i] = p != nullptr ? T(*p) : T(0);
    }
  }
  /** Stores this lane's elements; those outside the destination's extents are not written. */
  template <typename S, typename E>
  void store(const tensor<S, E, tensor_inline>& dst) const {
    for (int i = 0; i < capacity; ++i) {
      int e = index(i);
      if (S* p = e < M * N ? dst.at(e % N, e / N) : nullptr) *p = S(elements[i]);
    }
  }
};

}  // namespace metal

namespace mpp {
namespace tensor_ops {

struct matmul2d_descriptor {
  enum class mode { multiply, multiply_accumulate };
  int m, n, k;
  bool transpose_left, transpose_right;
  bool relaxed_precision;
  mode matmul_mode;
  constexpr matmul2d_descriptor(int m_, int n_, int k_ = static_cast<int>(metal::dynamic_extent),
                                bool transpose_left_ = false, bool transpose_right_ = false,
                                bool relaxed_precision_ = false, mode mode_ = mode::multiply)
      : m(m_), n(n_), k(k_), transpose_left(transpose_left_), transpose_right(transpose_right_),
        relaxed_precision(relaxed_precision_), matmul_mode(mode_) {}
};

/** C (+)= A * B with A m x k (extents (k, m)), B k x n (extents (n, k)), C m x n. */
template <matmul2d_descriptor D, typename Scope>
class matmul2d {
  static_assert(metal::detail::same<Scope, metal::execution_simdgroup>,
                "metal-sim implements matmul2d on execution_simdgroup");
  static_assert(!D.transpose_left && !D.transpose_right,
                "metal-sim implements matmul2d without transposed operands");
  static_assert(D.m > 0 && D.n > 0, "matmul2d needs static m and n");

 public:
  static constexpr matmul2d_descriptor descriptor = D;
  using scope = Scope;

  template <typename Left, typename Right, typename Element>
  metal::cooperative_tensor<Element, D.m, D.n> get_destination_cooperative_tensor() const {
    return {};
  }

  /**
   * Every lane of the simdgroup must call run at the same place (the scope is uniform); each
   * computes its own destination elements from the operands in memory. Elements of A and B
   * outside their extents count as 0, as for the GPU's edge checks.
   */
  template <typename L, typename LE, typename R, typename RE, typename T>
  void run(const metal::tensor<L, LE, metal::tensor_inline>& left,
           const metal::tensor<R, RE, metal::tensor_inline>& right,
           metal::cooperative_tensor<T, D.m, D.n>& destination, METAL_SIM_SITE) const {
    metal::detail::exchange(0, "matmul2d::run", line, column);
    const int k = D.k == static_cast<int>(metal::dynamic_extent) ? int(left.get_extent(0)) : D.k;
    for (int i = 0; i < destination.capacity; ++i) {
      int e = destination.index(i);
      if (e >= D.m * D.n) continue;
      int row = e / D.n, col = e % D.n;
      float s = D.matmul_mode == matmul2d_descriptor::mode::multiply_accumulate
                    ? float(destination.elements[i])
                    : 0.0f;
      for (int kk = 0; kk < k; ++kk) {
        const L* a = left.at(kk, row);
        const R* b = right.at(col, kk);
        if (a != nullptr && b != nullptr) s = __builtin_fmaf(float(*a), float(*b), s);
      }
      destination.elements[i] = T(s);
    }
  }
};

}  // namespace tensor_ops
}  // namespace mpp
