// The interp device's executor: it runs verified Tile IR directly and is the semantic oracle
// every other backend is compared with. What it does is the contract; backends must match it
// (bit-exactness is not required where the notes say "in f32", but results must agree to
// rounding):
//
// Values. Scalars and row-major 1-D/2-D tiles. f32 math is done in float (never double);
//   f16/bf16 values are computed in f32 and rounded to the storage type (nearest even) after
//   every op. Integer math wraps (two's complement) at the dtype's width; bool is 0 or 1.
// Element-wise ops. Operands are scalars or tiles of the result shape (the builder inserted the
//   broadcasts). div: true division on floats, truncating on integers; floordiv: floor on both;
//   mod: remainder with the dividend's sign (C % and fmod); pow: floats only; maximum/minimum:
//   fmax/fmin (a NaN operand is ignored); sigmoid(x) = 1/(1+exp(-x)); erf = std::erf;
//   rsqrt = 1/sqrt; shr is arithmetic on signed and logical on unsigned types; not is bitwise,
//   logical on bool. Comparisons give bool; NaN compares unequal to everything.
// Casts. Float to float rounds; integer to float converts to f32 (nearest) then rounds to the
//   storage type; float to integer truncates toward zero and saturates at the type's range (NaN
//   gives 0), as on every device; integer to integer wraps; to bool is x != 0; bool to a number
//   is 0 or 1. A float constant is rounded to f32, then to its dtype;
//   an integer constant wraps to its dtype.
// Device errors (METILE_ERROR_DEVICE, naming the op, its source location and the program id;
//   these are undefined behaviour on real hardware and the interp is the checker): integer
//   div/floordiv/mod by zero, shift counts outside [0, bits), unmasked memory access outside its
//   buffer, a loop step of 0,
//   simd_shuffle_xor masks / simd_broadcast lanes outside [0, 32) or reaching a thread >= T,
//   simdgroup_role ranges past the threadgroup, tile_swizzle ids outside the grid.
// broadcast follows numpy (trailing dims aligned, size-1 dims stretch); reshape keeps row-major
//   order.
// Pointers are (memory region, element offset). Regions: each pointer argument (buffer contents
//   + argument offset, extending to the end of the buffer) and each shared() allocation.
//   ptr_offset adds element offsets. Every access is bounds-checked; masked-off lanes never
//   touch memory and a load gives `other` there (0 without one).
// atomic_add/max/min/xchg(ptrs, v [, mask]) and atomic_cas(ptrs, cmp, v [, mask]): each active
//   lane, in row-major order, reads its element, writes add (wrapping / f32), maximum or
//   minimum (fmax/fmin), v, or (cas) v when the stored bits equal cmp's, and gives the old
//   value; masked-off lanes give 0 (the activity pass has made them inactive; in a simdgroup_role, lanes outside it too, as for a store).
//   Each element's update is atomic with respect to every other
//   program instance (here: one lock per launch); the order between instances is unspecified.
// tile_load(ptr, row, col, stride)[i][j] = ptr[(row+i)*stride + col + j]; with bounds (rows,
//   cols), elements with !(0 <= row+i < rows && 0 <= col+j < cols) read 0 and are not
//   accessed; tile_store skips them.
// dot(a, b, acc)[i][j]: s = acc[i][j]; s += a[i][k]*b[k][j] for k = 0, 1, ... in order; products
//   and sums in f32 for float inputs (the result rounded to acc's dtype at the end), in wrapping
//   i32 for i8/u8 inputs.
// Reductions (sum, max, min) fold in row-major order from the identity (0, -inf/min, +inf/max)
//   over the whole tile (axis -1) or along an axis of a 2-D tile; f16/bf16 accumulate in f32
//   and round once; max/min fold with fmax/fmin. A scalar reduces to itself.
// cumsum/cumprod(x, axis, reverse): out[k] folds x along `axis` from the first element (the
//   last with reverse) up to k inclusive, in that order, from 0 / 1; f16/bf16 accumulate in f32
//   and each output rounds once; integers wrap.
// trans(x)[j][i] = x[i][j].
// device_print: for each value in operand order, each element in row-major order whose mask
//   (when masked) is true, one line (src/codegen/prelude/device_print.h) on stdout.
// for: iv takes the exact integers start, start+step, ... while iv < end (step > 0) or iv > end
//   (step < 0); the carried values start as the inits, each iteration's yield feeds the next,
//   and the results are the last carried values (the inits when the loop runs zero times).
// Grid: program_id/num_programs describe the launch; instances run in any order (here on a few
//   threads); a failing launch reports the first failing instance in grid order (x fastest).
// shared(size, dtype): a zero-filled region per program instance, one per shared op however
//   often the op runs. barrier: no-op (tiles run whole and in order).
// SIMT view, T = program.num_threads: thread_id() = [0, T); simd_lane_id() = i % 32;
//   simd_shuffle_xor(x, m)[i] = x[i ^ m]; simd_broadcast(x, l)[i] = x[(i & ~31) + l]; a scalar
//   x is returned unchanged.
// simdgroup_role(role, num_roles, first_sg, num_sgs): with S = ceil(T/32) simdgroups, the role's
//   simdgroups are [role*S/num_roles, (role+1)*S/num_roles) when num_sgs == 0, else [first_sg,
//   first_sg + num_sgs); its threads are [sg_begin*32, min(T, sg_end*32)). Inside the region a
//   store whose pointer tile is 1-D with exactly T elements writes only the role's threads'
//   elements; every other side effect runs once if the role has a thread, not at all otherwise.
//   Nested regions keep the intersection. With T = 0 (no SIMT view) the region always runs.
// tile_swizzle: src/ir/swizzle.h with grid_m = num_programs(0), grid_n = num_programs(1).
#include "runtime/interp/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "ir/reduction.h"
#include "ir/swizzle_names.h"
#define METILE_PRINT_FLUSH() std::fflush(stdout)
#include "codegen/prelude/device_print.h"
#include "runtime/host/process.h"
#include "runtime/host/parallel_for.h"
#include "runtime/interp/values.h"
#include "support/error.h"

namespace metile::interp {

namespace {

constexpr int64_t kLanes = 32;
// The reference executor favours simplicity over speed: a launch uses the calling thread and at
// most 7 host pool workers.
constexpr int kMaxPoolWorkers = 7;

struct Region {
  std::string label;  // "buffer `X`", "shared memory #0"
  uint8_t* base = nullptr;
  int64_t extent = 0;  // in elements
  DType dtype = DType::invalid;
};

// What all instances of one launch share.
struct LaunchState {
  const Program& p;
  Grid grid;
  std::vector<Region> regions;  // one per pointer parameter
  std::vector<std::pair<ValueId, Val>> params;
  // Makes each atomic op of an instance one indivisible step (a pointer: the state is moved).
  std::unique_ptr<std::mutex> atomics = std::make_unique<std::mutex>();
  // METILE_TIMEOUT_S: past this, every instance stops at its next check.
  double limit_s = 0;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

[[noreturn]] void fault(std::string message) { throw OpFault{std::move(message)}; }

const Elem& at(const Val& v, size_t k) { return v.e.size() == 1 ? v.e[0] : v.e[k]; }
uint32_t region_at(const Val& v, size_t k) {
  return v.region.size() == 1 ? v.region[0] : v.region[k];
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fault("element offset overflows 64 bits");
  return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fault("element offset overflows 64 bits");
  return r;
}

class Instance {
 public:
  explicit Instance(const LaunchState& launch)
      : l_(launch), p_(launch.p), threads_(launch.p.num_threads), env_(launch.p.values.size()) {}

  void run(const std::array<uint32_t, 3>& pid) {
    pid_ = pid;
    regions_ = l_.regions;
    shared_.clear();
    shared_region_.clear();
    in_role_ = false;
    for (const auto& [id, v] : l_.params) env_[id] = v;
    block(p_.body);
  }

 private:
  const Val& val(ValueId v) const { return env_[v]; }
  const Type& type(ValueId v) const { return p_.type(v); }
  int64_t scalar(ValueId v) const { return env_[v].e[0].i; }
  void set(const Op& op, Val v) { env_[op.results[0]] = std::move(v); }

  void block(const Block& b) {
    for (const Op& op : b.ops) {
      // A cooperative time limit: the clock is read every 256 ops (and at the first), cheap
      // next to the ops themselves.
      if ((ops_++ & 255) == 0 && std::chrono::steady_clock::now() >= l_.deadline)
        fail(METILE_ERROR_DEVICE, "interp", "kernel ", p_.name, " did not finish within ",
             l_.limit_s, " s (METILE_TIMEOUT_S); stopped at ", p_.where(op.loc), op_name(op.kind),
             " in program (", pid_[0], ",", pid_[1], ",", pid_[2], ")");
      try {
        exec(op);
      } catch (const OpFault& f) {
        fail(METILE_ERROR_DEVICE, "interp", p_.where(op.loc), op_name(op.kind), ": ", f.message,
             " in program (", pid_[0], ",", pid_[1], ",", pid_[2], ")");
      }
    }
  }

  uint8_t* address(uint32_t region, int64_t offset) {
    const Region& r = regions_[region];
    if (offset < 0 || offset >= r.extent)
      fault(cat("access of element ", offset, " outside ", r.label, " (", r.extent, " elements)"));
    return r.base + offset * static_cast<int64_t>(dtype_size(r.dtype));
  }

  void exec(const Op& op);
  Val elementwise(const Op& op);
  Val broadcast(const Op& op);
  void load(const Op& op);
  void store(const Op& op);
  void atomic(const Op& op);
  void tile_access(const Op& op);
  void shared(const Op& op);
  void dot(const Op& op);
  void reduce(const Op& op);
  void loop(const Op& op);
  void role(const Op& op);
  void simt(const Op& op);
  void swizzle(const Op& op);
  void scan(const Op& op);
  void print(const Op& op);

  const LaunchState& l_;
  const Program& p_;
  const int64_t threads_;
  std::array<uint32_t, 3> pid_{};
  std::vector<Val> env_;  // by ValueId; SSA guarantees a definition before every use
  std::vector<Region> regions_;
  std::vector<std::unique_ptr<uint8_t[]>> shared_;
  std::unordered_map<ValueId, uint32_t> shared_region_;
  std::vector<Val> yielded_;
  bool in_role_ = false;
  int64_t role_lo_ = 0, role_hi_ = 0;  // the threads whose stores a role region keeps
  uint64_t ops_ = 0;                   // ops run, for the time-limit checks
};

void Instance::exec(const Op& op) {
  switch (op.kind) {
    case OpKind::CONST: {
      DType d = type(op.result()).dtype;
      const AttrValue* v = op.find_attr("value");
      if (const auto* f = std::get_if<double>(v))
        set(op, Val{{float_elem(round_float(static_cast<float>(*f), d))}, {}});
      else
        set(op, Val{{int_elem(wrap_int(std::get<int64_t>(*v), d))}, {}});
      return;
    }
    case OpKind::PROGRAM_ID:
    case OpKind::NUM_PROGRAMS: {
      size_t axis = static_cast<size_t>(op.attr_int("axis"));
      uint32_t v = op.kind == OpKind::PROGRAM_ID ? pid_[axis] : l_.grid.dims[axis];
      set(op, Val{{int_elem(wrap_int(v, DType::i32))}, {}});
      return;
    }
    case OpKind::ARANGE: {
      int64_t start = scalar(op.operands[0]), n = op.attr_int("size");
      Val out;
      out.e.resize(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k)
        out.e[k] =
            int_elem(wrap_int(static_cast<int64_t>(static_cast<uint64_t>(start) + k), DType::i32));
      set(op, std::move(out));
      return;
    }
    case OpKind::BROADCAST:
      set(op, broadcast(op));
      return;
    case OpKind::RESHAPE:
      set(op, val(op.operands[0]));
      return;
    case OpKind::LOAD:
      load(op);
      return;
    case OpKind::STORE:
      store(op);
      return;
    case OpKind::ATOMIC_ADD:
    case OpKind::ATOMIC_MAX:
    case OpKind::ATOMIC_MIN:
    case OpKind::ATOMIC_XCHG:
    case OpKind::ATOMIC_CAS:
      atomic(op);
      return;
    case OpKind::TILE_LOAD:
    case OpKind::TILE_STORE:
      tile_access(op);
      return;
    case OpKind::SHARED:
      shared(op);
      return;
    case OpKind::DOT:
      dot(op);
      return;
    case OpKind::REDUCE_SUM:
    case OpKind::REDUCE_MAX:
    case OpKind::REDUCE_MIN:
      reduce(op);
      return;
    case OpKind::FOR:
      loop(op);
      return;
    case OpKind::YIELD:
      yielded_.clear();
      for (ValueId v : op.operands) yielded_.push_back(val(v));
      return;
    case OpKind::SIMDGROUP_ROLE:
      role(op);
      return;
    case OpKind::THREAD_ID:
    case OpKind::SIMD_LANE_ID:
    case OpKind::SIMD_SHUFFLE_XOR:
    case OpKind::SIMD_BROADCAST:
      simt(op);
      return;
    case OpKind::BARRIER:
      return;
    case OpKind::TILE_SWIZZLE:
      swizzle(op);
      return;
    case OpKind::CUMSUM:
    case OpKind::CUMPROD:
      scan(op);
      return;
    case OpKind::TRANS: {
      const Shape& s = type(op.operands[0]).shape;
      const Val& x = val(op.operands[0]);
      Val out;
      out.e.resize(x.e.size());
      for (int64_t i = 0; i < s.dims[0]; ++i)
        for (int64_t j = 0; j < s.dims[1]; ++j) out.e[j * s.dims[0] + i] = at(x, i * s.dims[1] + j);
      set(op, std::move(out));
      return;
    }
    case OpKind::DEVICE_PRINT:
      print(op);
      return;
    default:
      METILE_ASSERT(is_elementwise(op.kind), "interp has no rule for ", op_name(op.kind));
      set(op, elementwise(op));
  }
}

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

void Instance::load(const Op& op) {
  const Val& ptr = val(op.operands[0]);
  const Val* mask = op.operands.size() > 1 ? &val(op.operands[1]) : nullptr;
  const Val* other = op.operands.size() > 2 ? &val(op.operands[2]) : nullptr;
  const DType d = type(op.operands[0]).dtype;
  const size_t n = static_cast<size_t>(type(op.result()).shape.numel());
  Val out;
  out.e.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (mask && !at(*mask, i).i) {
      out.e[i] = other ? at(*other, i) : int_elem(0);
      continue;
    }
    out.e[i] = read_elem(address(region_at(ptr, i), at(ptr, i).i), d);
  }
  set(op, std::move(out));
}

void Instance::store(const Op& op) {
  const Val &ptr = val(op.operands[0]), &v = val(op.operands[1]);
  const Val* mask = op.operands.size() > 2 ? &val(op.operands[2]) : nullptr;
  const Type& pt = type(op.operands[0]);
  size_t lo = 0, hi = static_cast<size_t>(pt.shape.numel());
  if (in_role_ && pt.shape.rank == 1 && pt.shape.dims[0] == threads_) {
    lo = static_cast<size_t>(role_lo_);
    hi = static_cast<size_t>(role_hi_);
  }
  for (size_t i = lo; i < hi; ++i) {
    if (mask && !at(*mask, i).i) continue;
    write_elem(address(region_at(ptr, i), at(ptr, i).i), pt.dtype, at(v, i));
  }
}

void Instance::atomic(const Op& op) {
  const bool cas = op.kind == OpKind::ATOMIC_CAS;
  const size_t value_i = cas ? 2 : 1;
  const Val& ptr = val(op.operands[0]);
  const Val& v = val(op.operands[value_i]);
  const Val* cmp = cas ? &val(op.operands[1]) : nullptr;
  const Val* mask = op.operands.size() > value_i + 1 ? &val(op.operands[value_i + 1]) : nullptr;
  const DType d = type(op.operands[0]).dtype;
  const size_t n = static_cast<size_t>(type(op.result()).shape.numel());
  Val out;
  out.e.assign(n, int_elem(0));
  size_t lo = 0, hi = n;  // a role keeps its threads' lanes, as for stores
  if (in_role_ && type(op.operands[0]).shape.rank == 1 && static_cast<int64_t>(n) == threads_) {
    lo = static_cast<size_t>(role_lo_);
    hi = static_cast<size_t>(role_hi_);
  }
  std::lock_guard<std::mutex> lock(*l_.atomics);
  for (size_t i = lo; i < hi; ++i) {
    if (mask && !at(*mask, i).i) continue;
    uint8_t* addr = address(region_at(ptr, i), at(ptr, i).i);
    const Elem old = read_elem(addr, d), x = at(v, i);
    Elem now = x;
    switch (op.kind) {
      case OpKind::ATOMIC_ADD: now = binary_elem(OpKind::ADD, d, old, x); break;
      case OpKind::ATOMIC_MAX: now = binary_elem(OpKind::MAXIMUM, d, old, x); break;
      case OpKind::ATOMIC_MIN: now = binary_elem(OpKind::MINIMUM, d, old, x); break;
      case OpKind::ATOMIC_CAS: {
        // Bitwise, as the hardware compares: -0.0 differs from 0.0 and a NaN equals itself.
        uint8_t expected[8] = {}, stored[8] = {};
        write_elem(expected, d, at(*cmp, i));
        write_elem(stored, d, old);
        if (std::memcmp(expected, stored, dtype_size(d)) != 0) now = old;
        break;
      }
      default: break;  // xchg writes x
    }
    write_elem(addr, d, now);
    out.e[i] = old;
  }
  set(op, std::move(out));
}

void Instance::tile_access(const Op& op) {
  const bool is_load = op.kind == OpKind::TILE_LOAD;
  const Val& ptr = val(op.operands[0]);
  const int64_t row = scalar(op.operands[1]), col = scalar(op.operands[2]);
  const int64_t stride = scalar(op.operands[3]);
  const size_t first_bound = is_load ? 4 : 5;
  const bool bounded = op.operands.size() > first_bound;
  const int64_t bound_rows = bounded ? scalar(op.operands[first_bound]) : 0;
  const int64_t bound_cols = bounded ? scalar(op.operands[first_bound + 1]) : 0;
  const Type& tt = is_load ? type(op.result()) : type(op.operands[4]);
  const DType d = type(op.operands[0]).dtype;
  const int64_t rows = tt.shape.dims[0], cols = tt.shape.dims[1];
  Val out;
  if (is_load) out.e.assign(static_cast<size_t>(rows * cols), int_elem(0));
  const Val* value = is_load ? nullptr : &val(op.operands[4]);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t r = checked_add(row, i);
    if (bounded && (r < 0 || r >= bound_rows)) continue;
    const int64_t row_base = checked_add(ptr.e[0].i, checked_mul(r, stride));
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t c = checked_add(col, j);
      if (bounded && (c < 0 || c >= bound_cols)) continue;
      uint8_t* addr = address(ptr.region[0], checked_add(row_base, c));
      const size_t k = static_cast<size_t>(i * cols + j);
      if (is_load)
        out.e[k] = read_elem(addr, d);
      else
        write_elem(addr, d, value->e[k]);
    }
  }
  if (is_load) set(op, std::move(out));
}

void Instance::shared(const Op& op) {
  auto it = shared_region_.find(op.result());
  if (it == shared_region_.end()) {
    const DType d = type(op.result()).dtype;
    const int64_t size = op.attr_int("size");
    shared_.push_back(std::make_unique<uint8_t[]>(static_cast<size_t>(size) * dtype_size(d)));
    regions_.push_back(
        Region{cat("shared memory #", shared_.size() - 1), shared_.back().get(), size, d});
    it = shared_region_.emplace(op.result(), static_cast<uint32_t>(regions_.size() - 1)).first;
  }
  set(op, Val{{int_elem(0)}, {it->second}});
}

void Instance::dot(const Op& op) {
  const Type &at_ = type(op.operands[0]), &ct = type(op.operands[2]);
  const Val &a = val(op.operands[0]), &b = val(op.operands[1]), &c = val(op.operands[2]);
  const int64_t m = at_.shape.dims[0], kk = at_.shape.dims[1], n = ct.shape.dims[1];
  Val out;
  out.e.resize(static_cast<size_t>(m * n));
  const bool fl = is_float(at_.dtype);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t ij = static_cast<size_t>(i * n + j);
      if (fl) {
        float s = c.e[ij].f;
        for (int64_t k = 0; k < kk; ++k) {
          // Two statements: the product is rounded before the sum, never fused into an FMA
          // (clang contracts within one expression by default).
          const float product = a.e[i * kk + k].f * b.e[k * n + j].f;
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
              : k == Reduction::max ? std::fmax(acc, v)
                                    : std::fmin(acc, v);
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

void Instance::print(const Op& op) {
  const std::string head = p_.where(op.loc);
  const size_t n = device_print_values(op);
  if (n == 0) {
    metile_device_print(head.c_str(), device_print_label(op, 0).c_str(), pid_[0], pid_[1],
                        pid_[2], -1, 0, 0, 0, 0, 0.0);
    return;
  }
  for (size_t k = 0; k < n; ++k) {
    const Type& t = type(op.operands[k]);
    const Val& x = val(op.operands[k]);
    const Val* mask = op.attr_int("masked") ? &val(op.operands[n + k]) : nullptr;
    const std::string label = device_print_label(op, k);
    const int64_t cols = t.shape.rank == 2 ? t.shape.dims[1] : 1;
    const int64_t numel = t.shape.numel();
    for (int64_t e = 0; e < numel; ++e) {
      if (mask && at(*mask, static_cast<size_t>(e)).i == 0) continue;
      const Elem v = at(x, static_cast<size_t>(e));
      const bool fl = is_float(t.dtype);
      metile_device_print(head.c_str(), label.c_str(), pid_[0], pid_[1], pid_[2], t.shape.rank,
                          t.shape.rank == 2 ? e / cols : e, t.shape.rank == 2 ? e % cols : 0,
                          fl ? 1 : 0, fl ? 0 : v.i, fl ? static_cast<double>(v.f) : 0.0);
    }
  }
}

void Instance::loop(const Op& op) {
  const int64_t start = scalar(op.operands[0]), end = scalar(op.operands[1]);
  const int64_t step = scalar(op.operands[2]);
  if (step == 0) fault("step is 0");
  const Block& body = op.body();
  const size_t n = op.operands.size() - 3;
  std::vector<Val> carried(n);
  for (size_t i = 0; i < n; ++i) carried[i] = val(op.operands[3 + i]);
  for (int64_t iv = start; step > 0 ? iv < end : iv > end;) {
    env_[body.args[0]] = Val{{int_elem(iv)}, {}};
    for (size_t i = 0; i < n; ++i) env_[body.args[i + 1]] = std::move(carried[i]);
    block(body);
    carried = std::move(yielded_);
    yielded_.clear();
    if (__builtin_add_overflow(iv, step, &iv)) break;  // the next value is past any end
  }
  for (size_t i = 0; i < n; ++i) env_[op.results[i]] = std::move(carried[i]);
}

void Instance::role(const Op& op) {
  if (threads_ == 0) {
    block(op.body());
    return;
  }
  const int64_t role = op.attr_int("role"), num_roles = op.attr_int("num_roles");
  const int64_t first = op.attr_int("first_sg"), count = op.attr_int("num_sgs");
  const int64_t sgs = (threads_ + kLanes - 1) / kLanes;
  int64_t sg_begin = role * sgs / num_roles, sg_end = (role + 1) * sgs / num_roles;
  if (count != 0) {
    if (first + count > sgs)
      fault(cat("simdgroups [", first, ", ", first + count, ") are past the ", sgs,
                " simdgroups of ", threads_, " threads"));
    sg_begin = first;
    sg_end = first + count;
  }
  int64_t lo = sg_begin * kLanes, hi = std::min(threads_, sg_end * kLanes);
  const bool outer = in_role_;
  const int64_t outer_lo = role_lo_, outer_hi = role_hi_;
  if (outer) {
    lo = std::max(lo, outer_lo);
    hi = std::min(hi, outer_hi);
  }
  if (lo >= hi) return;  // no thread of the role: no side effects, and no value escapes
  // A fault abandons the instance, and run() resets the role state, so no unwinding is needed.
  in_role_ = true;
  role_lo_ = lo;
  role_hi_ = hi;
  block(op.body());
  in_role_ = outer;
  role_lo_ = outer_lo;
  role_hi_ = outer_hi;
}

void Instance::simt(const Op& op) {
  const size_t t = static_cast<size_t>(threads_);
  Val out;
  if (op.kind == OpKind::THREAD_ID || op.kind == OpKind::SIMD_LANE_ID) {
    out.e.resize(t);
    for (size_t i = 0; i < t; ++i)
      out.e[i] = int_elem(op.kind == OpKind::THREAD_ID ? static_cast<int64_t>(i)
                                                       : static_cast<int64_t>(i % kLanes));
    set(op, std::move(out));
    return;
  }
  const Val& x = val(op.operands[0]);
  const int64_t lane = scalar(op.operands[1]);
  const bool xor_mode = op.kind == OpKind::SIMD_SHUFFLE_XOR;
  if (lane < 0 || lane >= kLanes)
    fault(cat(xor_mode ? "mask " : "lane ", lane, " is outside [0, 32)"));
  if (type(op.operands[0]).is_scalar()) {
    set(op, x);
    return;
  }
  out.e.resize(t);
  for (size_t i = 0; i < t; ++i) {
    const size_t from = xor_mode
                            ? i ^ static_cast<size_t>(lane)
                            : (i & ~static_cast<size_t>(kLanes - 1)) + static_cast<size_t>(lane);
    if (from >= t)
      fault(cat("thread ", i, " reads lane ", from % kLanes, " of its simdgroup, thread ", from,
                ", which is past the thread count ", t));
    out.e[i] = x.e[from];
  }
  set(op, std::move(out));
}

void Instance::swizzle(const Op& op) {
  const int64_t pm = scalar(op.operands[0]), pn = scalar(op.operands[1]);
  const int64_t gm = l_.grid.dims[0], gn = l_.grid.dims[1];
  if (pm < 0 || pm >= gm || pn < 0 || pn >= gn)
    fault(cat("program ids (", pm, ", ", pn, ") are outside the ", gm, " x ", gn, " grid"));
  const std::string& pattern = op.attr_str("pattern");
  const int code = swizzle_code(pattern);
  metile_swizzled<int64_t> r =
      metile_swizzle<int64_t>(code, pm, pn, gm, gn, op.attr_int("block_size"));
  env_[op.results[0]] = Val{{int_elem(r.m)}, {}};
  env_[op.results[1]] = Val{{int_elem(r.n)}, {}};
}

LaunchState make_state(const Program& p, const Grid& grid, const std::vector<LaunchArg>& args) {
  if (args.size() != p.params.size())
    fail(METILE_ERROR_INVALID_ARGUMENT, "interp", p.name, " takes ", p.params.size(),
         " arguments, got ", args.size());
  LaunchState st{p, grid, {}, {}};
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& prm = p.params[i];
    const Type& t = p.type(prm.value);
    const LaunchArg& a = args[i];
    if (!t.is_ptr) {
      st.params.emplace_back(prm.value, Val{{elem_from_bits(a.bits, t.dtype)}, {}});
      continue;
    }
    if (a.buffer == nullptr || a.offset > a.buffer->size())
      fail(METILE_ERROR_INVALID_ARGUMENT, "interp", "argument `", prm.name,
           "` needs a buffer and an offset inside it");
    const size_t elem = dtype_size(t.dtype);
    st.regions.push_back(Region{
        cat("buffer `", prm.name, "`"), static_cast<uint8_t*>(a.buffer->contents()) + a.offset,
        static_cast<int64_t>((a.buffer->size() - a.offset) / elem), t.dtype});
    st.params.emplace_back(prm.value,
                           Val{{int_elem(0)}, {static_cast<uint32_t>(st.regions.size() - 1)}});
  }
  return st;
}

}  // namespace

void check_supported(const Program& program) {
  if (program.num_threads > kMaxThreads)
    fail(METILE_ERROR_UNSUPPORTED, "interp", "kernel ", program.name, " uses ", program.num_threads,
         " threads; the interp device runs at most ", kMaxThreads, " per program");
  uint64_t total = 0;
  walk(program.body, [&](const Op& op) {
    if (op.kind != OpKind::SHARED) return;
    const uint64_t size = static_cast<uint64_t>(op.attr_int("size"));
    total = size > kThreadgroupMemoryBytes ? UINT64_MAX : total + shared_bytes(program, op);
    if (total > kThreadgroupMemoryBytes)
      fail(METILE_ERROR_UNSUPPORTED, "interp", program.where(op.loc), "shared: kernel ",
           program.name, " needs more than the interp device's ", kThreadgroupMemoryBytes,
           " bytes of threadgroup memory (",
           total == UINT64_MAX ? cat(size, " elements here") : cat(total, " bytes so far"), ")");
  });
}

void execute(const Program& program, const Grid& grid, const std::vector<LaunchArg>& args) {
  LaunchState st = make_state(program, grid, args);
  st.limit_s = host::launch_timeout_s();
  if (st.limit_s > 0)
    st.deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(st.limit_s));
  const uint64_t count = grid.count();
  const uint64_t gx = grid.dims[0], gy = grid.dims[1];
  std::atomic<uint64_t> first_failure{count};
  std::mutex mu;
  std::exception_ptr error;
  auto record = [&](uint64_t i) {
    std::lock_guard<std::mutex> lock(mu);
    if (i < first_failure.load()) {
      first_failure = i;
      error = std::current_exception();
    }
  };
  // One Instance (the per-thread register file) per chunk; at most 32 chunks keep that cheap.
  auto work = [&](uint64_t begin, uint64_t end) {
    std::unique_ptr<Instance> inst;
    try {
      inst = std::make_unique<Instance>(st);
    } catch (...) {
      record(begin);
      return;
    }
    for (uint64_t i = begin; i < end; ++i) {
      // Instances past a failure need not run; those before it still do, so the error that
      // wins is the first in grid order whatever the scheduling.
      if (i > first_failure.load()) return;
      try {
        inst->run({static_cast<uint32_t>(i % gx), static_cast<uint32_t>(i / gx % gy),
                   static_cast<uint32_t>(i / (gx * gy))});
      } catch (...) {
        record(i);
      }
    }
  };
  host::parallel_for(count, std::max<uint64_t>(1, count / 32), kMaxPoolWorkers, work);
  if (error) std::rethrow_exception(error);
}

}  // namespace metile::interp
