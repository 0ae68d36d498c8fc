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
//   max_number/min_number (a NaN operand, quiet or signalling, is ignored);
//   sigmoid(x) = 1/(1+exp(-x)); erf = std::erf;
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
//   and sums in f32 for float inputs, FP8 ones (exact products) included (the result rounded to
//   acc's dtype at the end), in wrapping i32 for i8/u8 inputs. f32 inputs of a dot with
//   input_precision "tf32" are rounded to TF32 first; with "tf32x3" each term is lo(a)*hi(b) + hi(a)*lo(b) + hi(a)*hi(b), three sums
//   (hi = tf32(x), lo = tf32(x - hi); exec_math.cpp).
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
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>

#define METILE_PRINT_FLUSH() std::fflush(stdout)
#include "codegen/prelude/device_print.h"
#include "runtime/host/process.h"
#include "runtime/host/parallel_for.h"
#include "runtime/interp/instance.h"

namespace metile::interp {

namespace {

// The reference executor favours simplicity over speed: a launch uses the calling thread and at
// most 7 host pool workers.
constexpr int kMaxPoolWorkers = 7;

}  // namespace

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
    case OpKind::IF:
      branch(op);
      return;
    case OpKind::WHILE:
      while_loop(op);
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

void Instance::branch(const Op& op) {
  block(op.regions[scalar(op.operands[0]) != 0 ? 0 : 1]);
  std::vector<Val> out = std::move(yielded_);
  yielded_.clear();
  for (size_t i = 0; i < op.results.size(); ++i) env_[op.results[i]] = std::move(out[i]);
}

void Instance::while_loop(const Op& op) {
  const Block& before = op.regions[0];
  const Block& after = op.regions[1];
  const size_t n = op.operands.size();
  std::vector<Val> carried(n);
  for (size_t i = 0; i < n; ++i) carried[i] = val(op.operands[i]);
  for (;;) {
    for (size_t i = 0; i < n; ++i) env_[before.args[i]] = std::move(carried[i]);
    block(before);
    std::vector<Val> passed = std::move(yielded_);
    yielded_.clear();
    const bool go = at(passed[0], 0).i != 0;
    if (!go) {
      for (size_t i = 0; i < n; ++i) env_[op.results[i]] = std::move(passed[i + 1]);
      return;
    }
    for (size_t i = 0; i < n; ++i) env_[after.args[i]] = std::move(passed[i + 1]);
    block(after);
    carried = std::move(yielded_);
    yielded_.clear();
  }
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

namespace {

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
