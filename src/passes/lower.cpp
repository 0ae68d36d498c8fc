// Lowering driver: the ops that need no memory traffic (element-wise ops, program ids, aranges,
// loops, simdgroup roles, SIMT ops, tile_swizzle), in the thread count and layouts that layout
// assignment chose (assign_layouts.cpp, which also defines the canonical layout_for).
#include <algorithm>
#include <set>

#include "ir/param_access.h"
#include "passes/lower_internal.h"
#include "passes/pass.h"

namespace metile {

namespace lowering {

namespace {

std::string lower_stem(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  for (const char* suffix : {"_ptrs", "_ptr", "ptr"})
    if (s.size() > std::string(suffix).size() && s.ends_with(suffix)) {
      s.resize(s.size() - std::string(suffix).size());
      break;
    }
  return s;
}

}  // namespace

Lowering::Lowering(const Program& program, const GpuTarget& t, const LowerOptions& o,
                   const LayoutAssignment& layouts)
    : p(program), target(t), options(o), f(layouts.function), assigned(layouts.of) {
  simt = p.num_threads;
  chunk = layouts.chunk;
  map.assign(p.values.size(), kNoValue);
  producer.assign(p.values.size(), nullptr);
  walk(p.body, [&](const Op& d) {
    for (ValueId r : d.results) producer[r] = &d;
  });
  for (const auto& [dot, c] : layouts.dots) {
    static_cast<DotChoice&>(dot_plans[dot]) = c;
    for (int i = 0; i < 2; ++i) {
      if (c.direct[i] == nullptr) continue;
      direct_loads.insert(c.direct[i]);
      if (c.warpgroup()) warpgroup_staging[c.direct[i]] = c.staged[i];
    }
  }
  plan_pipelines();
  plan_persistent();
}

LayoutId Lowering::layout_for(const Shape& s) {
  return f.add_layout(canonical_layout(s.numel(), f.threads, simt, chunk));
}

LayoutId Lowering::layout_of(ValueId tile_value) {
  LayoutId l = assigned.at(tile_value);
  return l != gpu::kUniform ? l : layout_for(p.type(tile_value).shape);
}

ValueId Lowering::get(ValueId v) const {
  METILE_ASSERT(v < map.size() && map[v] != kNoValue, "Tile IR value ", v, " was not lowered");
  return map[v];
}

ValueId Lowering::materialize(ValueId v, LayoutId l) {
  LayoutId have = f.value(v).layout;
  if (have == l) return v;
  std::string stem = f.value(v).stem;  // copied: new values may move the table
  if (have == gpu::kUniform || have == gpu::kThread) return b.named(b.splat(v, l), stem);
  // Two uses disagree: an explicit conversion, expanded late by the lower-convert-layout pass.
  const gpu::Value xv = f.value(v);  // a copy: new values grow the table
  if (xv.is_ptr)  // the builder folds pointer broadcasts into offsets; what is left has no path
    unsupported("moving a tile of pointers between layouts is not supported on ", options.device,
                " yet (broadcast the offsets instead of the pointers)");
  gpu::Op c;
  c.kind = gpu::GpuOpKind::CONVERT_LAYOUT;
  c.operands = {v, scratch(xv.dtype, std::max(f.layout(have).numel, f.layout(l).numel)),
                builtin(gpu::Builtin::thread_index)};
  c.results = {b.named(b.new_value(xv.dtype, l), stem)};
  return b.append(std::move(c)).result();
}

namespace {

// Whether tile value v is index math lowering can compute again in any layout: an arange, or an
// element-wise op (a few levels deep) whose tile operands are.
bool recomputable(const Program& p, const std::vector<const Op*>& producer, ValueId v, int depth) {
  const Op* d = producer[v];
  if (d == nullptr || depth > 6 || p.type(v).is_ptr) return false;
  if (d->kind == OpKind::ARANGE) return true;
  if (!(is_elementwise(d->kind) || d->kind == OpKind::SELECT) || d->kind == OpKind::PTR_OFFSET) return false;
  for (ValueId x : d->operands)
    if (p.type(x).is_tile() && !recomputable(p, producer, x, depth + 1)) return false;
  return true;
}

}  // namespace

ValueId Lowering::arange_in(const Op& arange, LayoutId l) {
  ValueId idx = b.coord(l, builtin(gpu::Builtin::thread_index));
  ValueId start = get(arange.operands[0]);
  if (f.value(start).dtype != DType::i32) start = b.ew(OpKind::CAST, {start}, DType::i32);
  return b.named(b.ew(OpKind::ADD, {start, idx}), "offs");
}

ValueId Lowering::operand_in(ValueId v, LayoutId l) {
  ValueId g = get(v);
  if (f.value(g).layout == l || !f.layout_of(g).is_tile() || !f.layout(l).is_tile() ||
      !recomputable(p, producer, v, 0))
    return materialize(g, l);
  const Op& d = *producer[v];
  if (d.kind == OpKind::ARANGE) return arange_in(d, l);
  std::vector<ValueId> args;
  for (ValueId x : d.operands) args.push_back(p.type(x).is_tile() ? operand_in(x, l) : get(x));
  return b.named(b.ew(d.kind, args, d.kind == OpKind::CAST ? p.type(v).dtype : DType::invalid), f.value(g).stem);
}

ValueId Lowering::canonical(ValueId tile_value) {
  ValueId v = get(tile_value);
  if (!f.layout_of(v).is_tile()) return v;
  return materialize(v, layout_for(p.type(tile_value).shape));
}

ValueId Lowering::as_tile(ValueId tile_value) {
  return materialize(get(tile_value), layout_for(p.type(tile_value).shape));
}

ValueId Lowering::builtin(gpu::Builtin which, int axis) {
  auto key = std::make_pair(which, axis);
  auto it = builtins.find(key);
  if (it != builtins.end()) return it->second;
  static const char* axes[] = {"x", "y", "z"};
  using gpu::Builtin;
  ValueId v = pb.builtin(which, axis, gpu::is_group_builtin(which) ? gpu::kUniform : gpu::kThread);
  std::string stem = which == Builtin::thread_index           ? "tid"
                     : which == Builtin::simd_lane            ? "lane"
                     : which == Builtin::simdgroup_index      ? "sg"
                     : which == Builtin::threadgroup_position ? cat("pid_", axes[axis])
                                                              : cat("num_pid_", axes[axis]);
  pb.named(v, stem);
  builtins.emplace(key, v);
  return v;
}

ValueId Lowering::zero(DType d) {
  return is_float(d) ? b.constant_float(d, 0.0) : b.constant_int(d, 0);
}

ValueId Lowering::and_pred(ValueId x, ValueId y) {
  if (x == kNoValue) return y;
  if (y == kNoValue) return x;
  return b.named(b.ew(OpKind::BITAND, {x, y}), "pred");
}

ValueId Lowering::valid_pred(LayoutId l) {
  if (!f.layout(l).padded) return kNoValue;
  return b.named(b.valid(l, builtin(gpu::Builtin::thread_index)), "in_tile");
}

std::string Lowering::param_stem(ValueId gpu_ptr) const {
  for (const gpu::GpuParam& prm : f.params)
    if (prm.value == gpu_ptr) return lower_stem(prm.name);
  const gpu::Value& v = f.value(gpu_ptr);
  if (v.is_ptr && v.space == AddrSpace::threadgroup && v.layout == gpu::kUniform) return v.stem;
  return v.stem.ends_with("_ptrs") ? v.stem.substr(0, v.stem.size() - 5) : "val";
}

void Lowering::elementwise(const Op& op) {
  std::vector<ValueId> args;
  const Type& rt = p.type(op.result());
  // Tile operands meet in the result's layout (a fragment layout for a dot's epilogue).
  LayoutId want = rt.is_tile() ? layout_of(op.result()) : gpu::kUniform;
  for (ValueId v : op.operands) {
    ValueId g = get(v);
    if (rt.is_tile() && f.layout_of(g).is_tile() && f.value(g).layout != want) g = operand_in(v, want);
    args.push_back(g);
  }
  const bool converts = op.kind == OpKind::CAST || op.kind == OpKind::BITCAST;
  ValueId r = b.ew(op.kind, args, converts ? rt.dtype : DType::invalid);
  std::string stem = has_trait(op.kind, kCompare) ? "mask" : "t";
  if (op.kind == OpKind::PTR_OFFSET) stem = param_stem(args[0]) + "_ptrs";
  if (converts) stem = f.value(args[0]).stem;
  if (is_int(rt.dtype) && has_trait(op.kind, kBinary))  // index arithmetic keeps the index's name
    for (ValueId a : args)
      if (f.value(a).layout != gpu::kUniform && f.value(a).stem != "t") stem = f.value(a).stem;
  set(op.result(), b.named(r, stem));
}

void Lowering::loop(const Op& op) {
  std::vector<ValueId> operands;
  for (size_t i = 0; i < 3; ++i) operands.push_back(get(op.operands[i]));
  std::vector<LayoutId> layouts;
  for (size_t i = 3; i < op.operands.size(); ++i) {
    const Type& t = p.type(op.operands[i]);
    LayoutId l = t.is_tile() ? layout_of(op.results[i - 3]) : gpu::kUniform;
    layouts.push_back(l);
    operands.push_back(materialize(get(op.operands[i]), l));
  }
  persistent_before(op, operands[0], operands[1], operands[2]);  // lower_persistent.cpp
  // A pipelined loop may carry its stage index after the loop's own values (lower_pipeline.cpp).
  const ValueId counter = pipeline_prologue(op, operands[0], operands[1], operands[2]);
  if (counter != kNoValue) operands.push_back(counter);
  gpu::Op g;
  g.kind = gpu::GpuOpKind::FOR;
  g.operands = operands;
  g.regions.emplace_back();
  static const char* ivs[] = {"i", "j", "k", "l"};
  int depth = loop_depth;
  ValueId iv = b.new_value(f.value(operands[0]).dtype, gpu::kUniform);
  b.named(iv, depth < 4 ? ivs[depth] : cat("i", depth));
  g.regions[0].args.push_back(iv);
  set(op.body().args[0], iv);
  for (size_t i = 0; i < layouts.size(); ++i) {
    const gpu::Value init = f.value(operands[3 + i]);  // a copy: new values grow the table
    ValueId a = b.new_value(init.dtype, layouts[i], init.is_ptr, init.space);
    b.named(a, "acc");
    g.regions[0].args.push_back(a);
    set(op.body().args[1 + i], a);
    ValueId r = b.new_value(init.dtype, layouts[i], init.is_ptr, init.space);
    g.results.push_back(b.named(r, "acc"));
  }
  ValueId counter_arg = kNoValue;
  if (counter != kNoValue) {
    counter_arg = b.named(b.new_value(DType::i32, gpu::kUniform), "stage");
    g.regions[0].args.push_back(counter_arg);
    g.results.push_back(b.named(b.new_value(DType::i32, gpu::kUniform), "stage"));
  }
  gpu::Op& placed = b.append(std::move(g));
  std::vector<ValueId> results = placed.results;
  // Lower the body into the loop's block; `placed` stays valid because nothing is appended to
  // the outer block until the body is done.
  gpu::Block* outer = b.block();
  size_t index = outer->ops.size() - 1;
  gpu::Block body = std::move(placed.regions[0]);
  b.set_block(&body);
  ++loop_depth;
  pipeline_top(op, iv, counter_arg);
  const Block& tb = op.body();
  for (const Op& o : tb.ops) {
    if (o.kind != OpKind::YIELD) {
      this->op(o);
      continue;
    }
    const ValueId next_counter = pipeline_bottom(op, iv);
    gpu::Op y;
    y.kind = gpu::GpuOpKind::YIELD;
    for (size_t i = 0; i < o.operands.size(); ++i)
      y.operands.push_back(materialize(get(o.operands[i]), layouts[i]));
    if (next_counter != kNoValue) y.operands.push_back(next_counter);
    b.append(std::move(y));
  }
  --loop_depth;
  persistent_body_done(op);
  b.set_block(outer);
  outer->ops[index].regions[0] = std::move(body);
  pipeline_epilogue(op);
  for (size_t i = 0; i < op.results.size(); ++i) set(op.results[i], results[i]);
}

void Lowering::role(const Op& op) {
  // Same rule as interp: without the SIMT view the region simply runs. With it, the role owns
  // threads [lo, hi) (its simdgroups, an even split unless first_sg/num_sgs name them, cut at
  // T, intersected with enclosing roles). A store to a T-element 1-D tile keeps only those
  // threads' elements; every other side effect runs once if the role has a thread. Control
  // flow stays uniform: the range becomes a predicate, and barriers run in every thread.
  if (simt == 0) {
    block(op.body());
    return;
  }
  int64_t sgs = (simt + f.simd_width - 1) / f.simd_width;
  int64_t role_i = op.attr_int("role"), roles = op.attr_int("num_roles");
  int64_t first = role_i * sgs / roles, end = (role_i + 1) * sgs / roles;
  if (int64_t count = op.attr_int("num_sgs"); count != 0) {
    first = op.attr_int("first_sg");
    end = first + count;
    if (end > sgs)
      fail(METILE_ERROR_INVALID_PROGRAM, "lower", p.where(op.loc), "simdgroup_role: simdgroups [",
           first, ", ", end, ") are past the ", sgs, " simdgroups of ", simt, " threads");
  }
  int64_t lo = std::max(first * f.simd_width, role_lo), hi = std::min({simt, end * f.simd_width, role_hi});
  if (lo >= hi) return;  // no thread of the role: no side effects, and no value escapes
  int64_t saved_lo = role_lo, saved_hi = role_hi;
  role_lo = lo;
  role_hi = hi;
  block(op.body());
  role_lo = saved_lo;
  role_hi = saved_hi;
}

ValueId Lowering::role_predicate(ValueId ptrs_tile) {
  const Type& t = p.type(ptrs_tile);
  if (simt == 0 || (role_lo == 0 && role_hi >= simt) || t.shape.rank != 1 || t.shape.dims[0] != simt)
    return kNoValue;
  ValueId tid = builtin(gpu::Builtin::thread_index);
  ValueId in = b.ew(OpKind::BITAND, {b.ew(OpKind::GE, {tid, c_i32(role_lo)}),
                                     b.ew(OpKind::LT, {tid, c_i32(role_hi)})});
  return b.named(in, "in_role");
}

void Lowering::simt_op(const Op& op) {
  switch (op.kind) {
    case OpKind::THREAD_ID:
      set(op.result(), b.named(b.coord(layout_for(p.type(op.result()).shape), builtin(gpu::Builtin::thread_index)), "tid"));
      return;
    case OpKind::SIMD_LANE_ID: {
      ValueId lane = b.ew(OpKind::BITAND, {b.coord(layout_for(p.type(op.result()).shape), builtin(gpu::Builtin::thread_index)),
                                           c_i32(f.simd_width - 1)});
      set(op.result(), b.named(lane, "lane"));
      return;
    }
    case OpKind::SIMD_SHUFFLE_XOR:
    case OpKind::SIMD_BROADCAST: {
      ValueId x = get(op.operands[0]);
      if (f.value(x).layout == gpu::kUniform) {  // every lane holds the same value
        set(op.result(), x);
        return;
      }
      ValueId lane = get(op.operands[1]);
      ValueId r = op.kind == OpKind::SIMD_SHUFFLE_XOR ? b.shuffle_xor(x, lane) : b.shuffle(x, lane);
      set(op.result(), b.named(r, f.value(x).stem));
      return;
    }
    case OpKind::BARRIER:
      b.barrier();
      if (device_exchange()) b.block()->ops.back().attrs.push_back({"device", int64_t{1}});
      return;
    default:
      METILE_ASSERT(false, "not a SIMT op");
  }
}

// Threads may also exchange data through a buffer the kernel both writes and reads; then a
// user barrier must order device memory too.
bool Lowering::device_exchange() {
  if (device_exchange_ >= 0) return device_exchange_ == 1;
  ParamAccess access = param_access(p);
  bool both = false;
  for (ValueId v : access.written) both = both || access.read.count(v);
  device_exchange_ = both ? 1 : 0;
  return both;
}

void Lowering::swizzle(const Op& op) {
  gpu::Op g;
  g.kind = gpu::GpuOpKind::SWIZZLE;
  g.attrs = {{"pattern", op.attr_str("pattern")}, {"block", op.attr_int("block_size")}};
  g.operands = {get(op.operands[0]), get(op.operands[1]), builtin(gpu::Builtin::threadgroups_per_grid, 0),
                builtin(gpu::Builtin::threadgroups_per_grid, 1)};
  g.results = {b.named(b.new_value(DType::i32, gpu::kUniform), "pid_m"),
               b.named(b.new_value(DType::i32, gpu::kUniform), "pid_n")};
  gpu::Op& placed = b.append(std::move(g));
  set(op.results[0], placed.results[0]);
  set(op.results[1], placed.results[1]);
}

void Lowering::op(const Op& o) {
  current = &o;
  b.set_loc(o.loc);
  switch (o.kind) {
    case OpKind::CONST: {
      const Type& t = p.type(o.result());
      const AttrValue* v = o.find_attr("value");
      ValueId c = is_float(t.dtype) ? b.constant_float(t.dtype, o.attr_num("value"))
                                    : b.constant_int(t.dtype, std::get<int64_t>(*v));
      set(o.result(), c);
      return;
    }
    case OpKind::PROGRAM_ID:
      set(o.result(), builtin(gpu::Builtin::threadgroup_position, static_cast<int>(o.attr_int("axis"))));
      return;
    case OpKind::NUM_PROGRAMS:
      set(o.result(), builtin(gpu::Builtin::threadgroups_per_grid, static_cast<int>(o.attr_int("axis"))));
      return;
    case OpKind::ARANGE:
      set(o.result(), arange_in(o, layout_of(o.result())));
      return;
    case OpKind::BROADCAST:
      broadcast(o);
      return;
    case OpKind::RESHAPE:
      reshape(o);
      return;
    case OpKind::LOAD:
      load(o);
      return;
    case OpKind::STORE:
      store(o);
      return;
    case OpKind::ATOMIC_ADD:
    case OpKind::ATOMIC_MAX:
    case OpKind::ATOMIC_MIN:
    case OpKind::ATOMIC_XCHG:
    case OpKind::ATOMIC_CAS:
      atomic(o);
      return;
    case OpKind::TILE_LOAD:
      tile_load(o);
      return;
    case OpKind::TILE_STORE:
      tile_store(o);
      return;
    case OpKind::SHARED:
      shared(o);
      return;
    case OpKind::DOT:
      dot(o);
      return;
    case OpKind::REDUCE_SUM:
    case OpKind::REDUCE_MAX:
    case OpKind::REDUCE_MIN:
      reduce(o);
      return;
    case OpKind::FOR:
      loop(o);
      return;
    case OpKind::SIMDGROUP_ROLE:
      role(o);
      return;
    case OpKind::IF:
      branch(o);
      return;
    case OpKind::WHILE:
      while_loop(o);
      return;
    case OpKind::THREAD_ID:
    case OpKind::SIMD_LANE_ID:
    case OpKind::SIMD_SHUFFLE_XOR:
    case OpKind::SIMD_BROADCAST:
    case OpKind::BARRIER:
      simt_op(o);
      return;
    case OpKind::TILE_SWIZZLE:
      swizzle(o);
      return;
    case OpKind::CUMSUM:
    case OpKind::CUMPROD:
      scan(o);
      return;
    case OpKind::TRANS:
      trans(o);
      return;
    case OpKind::DEVICE_PRINT:
      print(o);
      return;
    case OpKind::YIELD:
      METILE_ASSERT(false, "yield outside a loop");
    default:
      break;
  }
  if (is_elementwise(o.kind) || o.kind == OpKind::SELECT || o.kind == OpKind::PTR_OFFSET) {
    elementwise(o);
    return;
  }
  unsupported("has no GPU lowering");
}

void Lowering::block(const Block& blk) {
  const Block* outer = block_now;
  for (const Op& o : blk.ops) {
    block_now = &blk;
    if (!lowered_early.count(&o)) op(o);
  }
  block_now = outer;
}

gpu::Function Lowering::run() {
  for (const Param& prm : p.params) {
    const Type& t = p.type(prm.value);
    gpu::Value v;
    v.dtype = t.dtype;
    v.is_ptr = t.is_ptr;
    v.space = t.space;
    v.stem = prm.name;
    ValueId g = f.new_value(v);
    f.params.push_back({prm.name, g});
    set(prm.value, g);
  }
  block(p.body);
  for (const auto& [key, arr] : scratch_arrays) {
    gpu::Op a;
    a.kind = gpu::GpuOpKind::ALLOC;
    gpu::SharedArray::linear({arr.second}).write(a);
    a.results = {arr.first};
    prologue.ops.push_back(std::move(a));
  }
  if (!init.ops.empty()) {
    b.set_block(&init);
    b.barrier();
  }
  for (auto& o : init.ops) prologue.ops.push_back(std::move(o));
  for (auto& o : f.body.ops) prologue.ops.push_back(std::move(o));
  f.body.ops = std::move(prologue.ops);
  return std::move(f);
}

}  // namespace lowering

gpu::Function lower_to_gpu(const Program& program, const LayoutAssignment& layouts,
                           const GpuTarget& target, const LowerOptions& options) {
  lowering::Lowering l(program, target, options, layouts);
  gpu::Function f = l.run();
  gpu::verify(f);
  // Placed as lowered, so the function can be emitted as it is; the pipeline places the arrays
  // again after its passes, which may remove some, and checks the limit there.
  PassContext ctx{target};
  ctx.check_threadgroup_limit = false;
  allocate_threadgroup_memory(f, ctx);
  return f;
}

gpu::Function lower_to_gpu(const Program& program, const GpuTarget& target,
                           const LowerOptions& options) {
  return lower_to_gpu(program, assign_layouts(program, target, options), target, options);
}

}  // namespace metile
