/** \file layout.h
 * CuTe-style layout algebra. The GPU lowering uses it to say which (thread, register) holds which
 * tile element, how threadgroup memory is addressed, and how matrix-unit fragments are laid out.
 *
 * An IntTuple is an integer or a tuple of IntTuples, written "(4,(2,3))". A Layout is a pair
 * shape:stride of congruent IntTuples, written "(4,2):(2,1)". It is a function from coordinates
 * to offsets: a coordinate is an integer index (split colexicographically, first mode fastest), a
 * flat tuple of per-mode indices, or a natural coordinate congruent with the shape. The offset is
 * the inner product of the natural coordinate with the stride. Shapes are >= 1, strides >= 0.
 *
 * The algebra (coalesce, composition, complement, divide, product, inverses) follows the CuTe
 * definitions, with these guarantees the original Python module lacked:
 *   - coalesce keeps the function: coalesce(L)(i) == L(i) for all i < size(L);
 *   - composition is exact, (A o B)(i) == A(B(i)), or it throws naming A, B and the failed
 *     divisibility condition;
 *   - logical_product(A, B) = (A, complement(A, size(A)*cosize(B)) o B), so 4:1 x 3:1 is
 *     (4,3):(1,4);
 *   - right_inverse is exact: L(right_inverse(L)(i)) == i for all i < size(right_inverse(L)).
 * Every invalid input throws metile::Error(METILE_ERROR_INVALID_ARGUMENT, "[layout] <op>: ...").
 *
 * Example: 256 threads each owning 4 consecutive columns of a 32x32 row-major f32 tile.
 * \code
 *   Layout tile = make_layout_row_major(tup(32, 32));          // (row, col) -> word: (32,32):(32,1)
 *   // thread/value -> tile coordinate index (row + 32*col): 4 values along a row, then threads
 *   Layout tv = make_layout(tup(tup(8, 32), 4), tup(tup(128, 1), 32));  // ((T8,T32),V4)
 *   Layout addr = composition(tile, tv);                        // (thread, value) -> word
 *   int64_t word = addr(tup(tid, v));                           // what the emitter needs
 *   Layout tiles = zipped_divide(tile, {make_layout(8), make_layout(8)});  // ((8,8),(4,4))
 *   int ways = bank_conflict_ways(composition(tile, make_layout(tup(32, 32))));  // 32: pad it
 * \endcode
 */
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace metile {

/** An integer, or a (non-empty) tuple of IntTuples. */
class IntTuple {
 public:
  IntTuple(int64_t value = 0) : value_(value) {}  // NOLINT: leaves convert implicitly
  explicit IntTuple(std::vector<IntTuple> elems);

  bool is_int() const { return elems_.empty(); }
  /** The integer of a leaf; throws on a tuple. */
  int64_t value() const;
  /** 1 for an integer, else the number of top-level elements (CuTe's rank). */
  int rank() const { return is_int() ? 1 : static_cast<int>(elems_.size()); }
  /** 0 for an integer, else 1 + the deepest element. */
  int depth() const;
  /** Product of all leaves. */
  int64_t size() const;
  /** Element i of a tuple; for an integer, i == 0 gives the integer itself. */
  const IntTuple& operator[](int i) const;
  const std::vector<IntTuple>& elems() const { return elems_; }
  /** The leaves in order. */
  std::vector<int64_t> leaves() const;
  std::string str() const;

  bool operator==(const IntTuple& o) const { return value_ == o.value_ && elems_ == o.elems_; }
  bool operator!=(const IntTuple& o) const { return !(*this == o); }

 private:
  int64_t value_ = 0;
  std::vector<IntTuple> elems_;
};

/** Builds a tuple: tup(4, tup(2, 3)) is (4,(2,3)). */
template <typename... T>
IntTuple tup(const T&... elems) {
  return IntTuple(std::vector<IntTuple>{IntTuple(elems)...});
}

/** Parses CuTe notation: "4", "(4,(2,3))". Whitespace is allowed between tokens. */
IntTuple parse_int_tuple(std::string_view text);
/** The leaves as a flat tuple (an integer stays an integer). */
IntTuple flatten(const IntTuple& t);
/** Same nesting structure. */
bool congruent(const IntTuple& a, const IntTuple& b);
/** Every coordinate of shape a is also a coordinate of shape b: equal sizes, and a is an integer
 * or both are tuples of the same rank with compatible elements. */
bool compatible(const IntTuple& a, const IntTuple& b);
/** Compact column-major strides: the exclusive prefix product of the leaves, starting at start. */
IntTuple compact_col_major(const IntTuple& shape, int64_t start = 1);
/** Compact row-major strides: the last mode is fastest, hierarchically. */
IntTuple compact_row_major(const IntTuple& shape, int64_t start = 1);
/** CuTe's shape_div: a divided by b through a's modes from the left (shape_div((4,6), 8) is
 * (1,3)); tuple by tuple is element-wise. At each step one operand must divide the other. */
IntTuple shape_div(const IntTuple& a, const IntTuple& b);
/** Natural coordinate of index idx in shape (colexicographic; the last mode absorbs any excess). */
IntTuple idx2crd(int64_t idx, const IntTuple& shape);
/** Colexicographic index of a coordinate (integer, flat or natural) in shape. */
int64_t crd2idx(const IntTuple& crd, const IntTuple& shape);
/** Offset of a coordinate (integer, flat or natural) under shape:stride. */
int64_t crd2idx(const IntTuple& crd, const IntTuple& shape, const IntTuple& stride);

std::ostream& operator<<(std::ostream& os, const IntTuple& t);

/** shape:stride, a function from coordinates to offsets. */
class Layout {
 public:
  /** 1:0, the layout of a single element. */
  Layout() : shape_(1), stride_(0) {}
  Layout(IntTuple shape, IntTuple stride);
  /** Compact column-major. */
  explicit Layout(IntTuple shape);

  const IntTuple& shape() const { return shape_; }
  const IntTuple& stride() const { return stride_; }
  int64_t size() const { return shape_.size(); }
  /** Largest offset + 1. */
  int64_t cosize() const;
  int rank() const { return shape_.rank(); }
  int depth() const { return shape_.depth(); }
  /** Top-level mode i as a layout; mode(0) of a rank-1 integer layout is the layout itself. */
  Layout mode(int i) const;

  /** Offset of index idx >= 0. Beyond size(), the last mode extends, as in CuTe. */
  int64_t operator()(int64_t idx) const;
  /** Offset of a flat or natural coordinate; every component must be inside its mode. */
  int64_t operator()(const IntTuple& crd) const;
  int64_t operator()(int64_t c0, int64_t c1) const { return (*this)(tup(c0, c1)); }
  int64_t operator()(int64_t c0, int64_t c1, int64_t c2) const { return (*this)(tup(c0, c1, c2)); }

  std::string str() const;
  bool operator==(const Layout& o) const { return shape_ == o.shape_ && stride_ == o.stride_; }
  bool operator!=(const Layout& o) const { return !(*this == o); }

 private:
  IntTuple shape_;
  IntTuple stride_;
};

std::ostream& operator<<(std::ostream& os, const Layout& l);

Layout make_layout(const IntTuple& shape, const IntTuple& stride);
/** Compact column-major (first mode fastest). */
Layout make_layout(const IntTuple& shape);
/** Compact row-major (last mode fastest). */
Layout make_layout_row_major(const IntTuple& shape);
/** Concatenation: the layouts become the top-level modes of the result. */
Layout make_layout(const std::vector<Layout>& modes);
/** Parses "(4,2):(2,1)"; a bare shape "(4,2)" gives the compact column-major layout. */
Layout parse_layout(std::string_view text);
/** Same function, flat shape and stride. */
Layout flatten(const Layout& l);

/** The same function on [0, size) with the fewest modes: size-1 modes dropped, neighbours
 * (s0:d0, s1:s0*d0) merged. Depth <= 1; 1:0 if nothing is left. */
Layout coalesce(const Layout& l);
/** Coalesces each top-level mode i < rank(profile) separately (an integer profile coalesces the
 * whole layout); later modes are kept. */
Layout coalesce(const Layout& l, const IntTuple& profile);
/** Drops stride-0 and size-1 modes, then coalesces: the same image, no broadcast. */
Layout filter(const Layout& l);

/** Functional composition R = A o B: R(c) == A(B(c)) for every coordinate c of B, and R's shape
 * is compatible with B's (each mode of B is composed separately). A is extended along its last
 * mode where B reaches past size(A). Throws when a mode of B fails the CuTe stride or shape
 * divisibility conditions against A, or when B's modes overlap in A so that their sum carries
 * between A's modes (then no by-mode result equals A(B(c))). */
Layout composition(const Layout& a, const Layout& b);
/** By-mode composition: mode i of A composed with tiler[i]; modes past the tiler are kept. */
Layout composition(const Layout& a, const std::vector<Layout>& tiler);
/** A reshaped to shape: composition(l, make_layout(shape)); size(shape) must equal size(l). */
Layout with_shape(const Layout& l, const IntTuple& shape);

/** The layout C, with ascending strides, such that (A, C) is a bijection onto [0, n) with
 * n >= cotarget and A's and C's images meet only at 0. A must be injective (stride-0 modes are
 * ignored) with strides that divide one another in sorted order. */
Layout complement(const Layout& a, int64_t cotarget);
/** complement(a, cosize(a)). */
Layout complement(const Layout& a);

/** ((tile), (rest)) = A o (B, complement(B, size(A))): mode 0 walks one tile, mode 1 the tiles. */
Layout logical_divide(const Layout& a, const Layout& tiler);
/** By-mode divide: mode i becomes ((tile_i), (rest_i)); modes past the tiler are kept. */
Layout logical_divide(const Layout& a, const std::vector<Layout>& tiler);
/** ((tile_0, tile_1, ...), (rest_0, rest_1, ..., untiled modes...)). */
Layout zipped_divide(const Layout& a, const std::vector<Layout>& tiler);
/** ((tile_0, tile_1, ...), rest_0, rest_1, ..., untiled modes...). */
Layout tiled_divide(const Layout& a, const std::vector<Layout>& tiler);

/** (A, complement(A, size(A)*cosize(B)) o B): B's pattern of copies of A. */
Layout logical_product(const Layout& a, const Layout& b);
/** Mode-wise (A_i, C_i) with C = the second mode of logical_product: A is the contiguous block
 * repeated over B's pattern. Ranks are padded with 1:0 to the larger; rank 1 gives (A, C). */
Layout blocked_product(const Layout& a, const Layout& b);
/** Mode-wise (C_i, A_i): A's elements interleaved (raked) across B's copies. */
Layout raked_product(const Layout& a, const Layout& b);

/** R with L(R(i)) == i for all i < size(R), where [0, size(R)) is the longest run of offsets
 * from 0 that L reaches through strides chaining from 1. Exact; 1:0 if L never reaches 1. */
Layout right_inverse(const Layout& l);
/** R with R(L(i)) == i for all i < size(L). L must be injective and admit a complement. */
Layout left_inverse(const Layout& l);

/** XOR swizzle of offsets: bits [base+shift, base+shift+bits) are XORed into
 * [base, base+bits). With shift >= bits the two groups do not overlap, so it is an involution
 * and a bijection on every aligned block of 2^(base+shift+bits) offsets. bits == 0 is identity. */
class Swizzle {
 public:
  Swizzle() = default;
  Swizzle(int bits, int base, int shift);
  int64_t operator()(int64_t offset) const;
  int bits() const { return bits_; }
  int base() const { return base_; }
  int shift() const { return shift_; }
  /** The target bits: ((1 << bits) - 1) << base. */
  int64_t mask() const { return ((int64_t{1} << bits_) - 1) << base_; }
  std::string str() const;  // "Sw<3,0,3>"
  bool operator==(const Swizzle& o) const {
    return bits_ == o.bits_ && base_ == o.base_ && shift_ == o.shift_;
  }

 private:
  int bits_ = 0, base_ = 0, shift_ = 0;
};

/** Threadgroup (shared) memory bank conflicts of an access pattern. thread_to_word maps indices
 * to 4-byte word addresses (then through swizzle); each run of `group` consecutive indices is one
 * simultaneous access by `group` threads. Returns the worst number of distinct words that one of
 * `banks` banks (word % banks) must serve in one access: 1 is conflict-free, same-word reads
 * broadcast. */
int bank_conflict_ways(const Layout& thread_to_word, const Swizzle& swizzle = Swizzle(),
                       int banks = 32, int group = 32);

/**
 * Matrix-unit fragments as (lane, value) -> element layouts. The offset is the column-major index
 * row + rows*col of the element in the fragment's matrix (A: M x K, B: K x N, C: M x N); the value
 * coordinate follows the hardware's register order.
 */
/** Apple simdgroup_matrix<T,8,8>: lane bit 0 is col bit 1, lane bits 1-2 are row bits 0-1, lane
 * bit 3 is col bit 2, lane bit 4 is row bit 2; thread_elements()[v] is at col + v. */
Layout simdgroup_8x8_fragment();
/** NVIDIA mma.sync.m16n8k8 .tf32: A (16x8) a0..a3. */
Layout mma_m16n8k8_tf32_a();
/** NVIDIA mma.sync.m16n8k8 .tf32: B (8x8) b0..b1. */
Layout mma_m16n8k8_tf32_b();
/** NVIDIA mma.sync.m16n8k16 .f16/.bf16: A (16x16) a0..a7. */
Layout mma_m16n8k16_f16_a();
/** NVIDIA mma.sync.m16n8k16 .f16/.bf16: B (16x8) b0..b3. */
Layout mma_m16n8k16_f16_b();
/** NVIDIA mma.sync.m16n8k8 / m16n8k16, f32 accumulators: C/D (16x8) c0..c3. */
Layout mma_m16n8_f32_c();

}  // namespace metile

namespace metile::detail {

/** One flattened mode; the layout_*.cpp files work on flat mode lists. */
struct Mode {
  int64_t shape;
  int64_t stride;
};
std::vector<Mode> flat_modes(const Layout& l);
/** 1:0 for no modes, s:d for one, a flat tuple otherwise. */
Layout layout_of_modes(const std::vector<Mode>& modes);
/** a * b, or an INVALID_ARGUMENT error naming op on overflow. */
int64_t checked_mul(int64_t a, int64_t b, const char* op);

}  // namespace metile::detail
