// vectorize-access: a load or store whose registers come in chunks of V consecutive elements
// (the layout's first register mode is V:1) becomes a vload/vstore of width V when its
// addresses are provably consecutive within each chunk: address(r0 + j) == address(r0) + j.
// The emitters then issue one vector access per chunk whose predicates are all true (the
// aligned body) and per-register predicated accesses otherwise (the masked tail), so masks,
// padding and `other` keep their meaning. Needs: verified GPU IR. Guarantees: the same memory
// effects; only dtypes the target lists in vector_dtypes, at most target.vector_bytes per access.
//
// The proof is a small abstract interpretation over integer and pointer values, per width V:
//   uniform  - equal in every register of a chunk (uniform values, chunk-constant expressions),
//              with a known divisor for alignment reasoning;
//   contig   - register r0 + j holds value(r0) + j; `aligned` when value(r0) % V == 0.
// coord of a chunk-aligned layout is contig and aligned; uniform + contig is contig; an aligned
// contig divided by a multiple of V is uniform (the chunk stays in one row) and modulo a
// multiple of V stays contig; ptr + contig is contig.
// Besides, `even`: every chunk's first value is congruent modulo V to register 0's (a thread's
// scalars, multiples of V, aligned contigs; kept by +, -, *, shifts and widening casts). An
// access whose pointers are even has one alignment for all its chunks: it is marked
// `one_align=1` and the emitter tests the first chunk's address only, not each chunk's (on an
// H100 the test per chunk in the seed softmax's unmasked store loop took it from 40 to 54
// registers a thread). METILE_GPU_OFF=one_align keeps the test per chunk.
// A swizzled threadgroup array (a warpgroup operand tile) starts at a multiple of 1024 bytes
// (allocate-threadgroup-memory), so its base is a multiple of 16 / size elements: an access in a
// loop into one whose pointers are aligned contigs is marked `aligned=1` and the emitter tests no
// alignment at all (a K-major B stored from registers each K step, DotChoice::b_stored: the test
// and its element-by-element tail cost 43 of mxfp4_gemm's 254 registers on sm_90a). Outside loops
// the test runs once and stays: without it ptxas gave flash attention's Q staging, before its
// loop, 255 registers and spills instead of 224. Other arrays (16-byte aligned too) keep their
// tests until measured: mma.sync's staging in the attention backward kernels and decode attention.
#include <map>
#include <numeric>

#include "passes/pass.h"

namespace metile {

namespace {

using gpu::GpuOpKind;

struct Info {
  enum Kind { unknown, uniform, contig } kind = unknown;
  bool aligned = false;  // contig: the chunk's first value is a multiple of V
  int64_t divisor = 1;   // uniform: a known divisor of the value (0: the value is 0)
  bool even = false;     // each chunk's first value is congruent modulo V to register 0's
};

bool divisible(int64_t divisor, int64_t v) { return divisor == 0 || divisor % v == 0; }

// Known divisors only need to say "a multiple of V"; on overflow, know nothing (1).
int64_t times(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? 1 : r;
}

// Register chunks r0..r0+V-1 (r0 % V == 0) hold consecutive elements starting at a multiple of V.
bool chunk_aligned(const gpu::Layout& l, int64_t v) {
  if (!l.is_tile()) return false;
  metile::Layout reg = flatten(l.reg), thr = flatten(l.thr);
  std::vector<int64_t> rs = reg.shape().leaves(), rd = reg.stride().leaves();
  if (rd[0] != 1 || rs[0] % v != 0) return false;
  for (size_t i = 1; i < rs.size(); ++i)
    if (rs[i] > 1 && rd[i] % v != 0) return false;
  std::vector<int64_t> ts = thr.shape().leaves(), td = thr.stride().leaves();
  for (size_t i = 0; i < ts.size(); ++i)
    if (ts[i] > 1 && td[i] % v != 0) return false;
  return true;
}

// Registers per chunk of consecutive elements: the first register mode when it has stride 1.
int64_t chunk_regs(const gpu::Layout& l) {
  if (!l.is_tile()) return 1;
  metile::Layout reg = flatten(l.reg);
  return reg.stride().leaves()[0] == 1 ? reg.shape().leaves()[0] : 1;
}

struct Analysis {
  const gpu::Function& f;
  int64_t v;
  const DefiningOps<gpu::Block>& def;  // the Vectorizer's, shared by every analysis
  const std::map<ValueId, std::pair<ValueId, ValueId>>& induction;  // iv -> (start, step)
  std::map<ValueId, Info> memo;

  const Info& info(ValueId x) {
    if (auto it = memo.find(x); it != memo.end()) return it->second;
    Info r = compute(x);
    return memo[x] = r;
  }

  Info uniform(int64_t divisor, bool even = false) const {
    return Info{Info::uniform, false, divisor, even || divisible(divisor, v)};
  }
  // A thread's scalar: the same value in every register.
  Info scalar(int64_t divisor) const { return uniform(divisor, true); }

  Info compute(ValueId x) {
    const gpu::Value& val = f.value(x);
    bool per_thread = !f.layout(val.layout).is_tile();
    if (auto it = induction.find(x); it != induction.end())
      return scalar(std::gcd(info(it->second.first).divisor, info(it->second.second).divisor));
    auto d = def.find(x);
    if (d == def.end()) return per_thread ? scalar(1) : Info{};
    const gpu::Op& op = *d->second;
    switch (op.kind) {
      case GpuOpKind::CONST: {
        const AttrValue& a = *op.find_attr("value");
        if (const auto* i = std::get_if<int64_t>(&a)) return scalar(*i == INT64_MIN ? 1 : *i < 0 ? -*i : *i);
        return scalar(1);
      }
      case GpuOpKind::COORD:
        return chunk_aligned(f.layout(val.layout), v) ? Info{Info::contig, true, 1, true} : Info{};
      case GpuOpKind::SPLAT:
        return info(op.operands[0]);
      case GpuOpKind::ALLOC:  // a swizzled array's base, in elements
        if (op.attr_str("layout").rfind("swizzle", 0) != 0) return scalar(1);
        return scalar(std::max<int64_t>(1, 16 / static_cast<int64_t>(dtype_size(val.dtype))));
      case GpuOpKind::ELEMENTWISE:
        return elementwise(op, per_thread);
      default:
        return per_thread ? scalar(1) : Info{};
    }
  }

  Info elementwise(const gpu::Op& op, bool per_thread) {
    std::vector<Info> in;
    bool all_uniform = true;
    for (ValueId o : op.operands) {
      in.push_back(info(o));
      all_uniform = all_uniform && in.back().kind == Info::uniform;
    }
    auto const_value = [&](size_t i, int64_t* out) {
      auto it = def.find(op.operands[i]);
      if (it == def.end() || it->second->kind != GpuOpKind::CONST) return false;
      const auto* c = std::get_if<int64_t>(it->second->find_attr("value"));
      if (c == nullptr) return false;
      *out = *c;
      return true;
    };
    switch (op.tile_op) {
      case OpKind::ADD:
      case OpKind::SUB:
      case OpKind::PTR_OFFSET: {
        if (all_uniform) return uniform(std::gcd(in[0].divisor, in[1].divisor), in[0].even && in[1].even);
        bool sub = op.tile_op == OpKind::SUB;
        for (int c = 0; c < (sub ? 1 : 2); ++c) {
          const Info &a = in[c], &b = in[1 - c];
          if (a.kind == Info::contig && b.kind == Info::uniform)
            return Info{Info::contig, a.aligned && divisible(b.divisor, v), 1, a.even && b.even};
        }
        return Info{};
      }
      case OpKind::MUL:
        if (all_uniform) return uniform(times(in[0].divisor, in[1].divisor), in[0].even && in[1].even);
        return Info{};
      case OpKind::SHL: {
        int64_t s = 0;
        if (all_uniform && const_value(1, &s) && s >= 0 && s < 32)
          return uniform(times(in[0].divisor, int64_t{1} << s), in[0].even);
        break;
      }
      case OpKind::DIV:
      case OpKind::MOD: {
        int64_t c = 0;
        if (in[0].kind == Info::contig && in[0].aligned && const_value(1, &c) && c > 0 && c % v == 0)
          return op.tile_op == OpKind::DIV ? uniform(1) : Info{Info::contig, true, 1, true};
        break;
      }
      case OpKind::CAST: {
        DType from = f.value(op.operands[0]).dtype, to = f.value(op.result()).dtype;
        if (is_int(from) && is_int(to) && dtype_size(to) >= dtype_size(from) && is_signed(from) == is_signed(to))
          return in[0];
        break;
      }
      default:
        break;
    }
    if (per_thread) return scalar(1);
    if (all_uniform) return uniform(1);
    return Info{};
  }
};

struct Vectorizer {
  gpu::Function& f;
  const GpuTarget& target;
  bool one_align;
  DefiningOps<gpu::Block> def;
  std::map<ValueId, std::pair<ValueId, ValueId>> induction;
  std::map<int64_t, Analysis> analyses;

  int64_t regs_of(const gpu::Op& op) const {
    return f.regs(op.kind == GpuOpKind::VLOAD ? op.result() : op.operands[1]);
  }

  void collect(const gpu::Block& b) {
    def = defining_ops(b);
    gpu::walk(b, [&](const gpu::Op& op) {
      if (op.kind == GpuOpKind::FOR) induction[op.body().args[0]] = {op.operands[0], op.operands[2]};
    });
  }

  Analysis& analysis(int64_t v) {
    auto it = analyses.find(v);
    if (it == analyses.end()) it = analyses.emplace(v, Analysis{f, v, def, induction, {}}).first;
    return it->second;
  }

  // The vector width for this access, or 0; `even`: its chunks share one alignment; `aligned`:
  // each chunk's address is a multiple of the width.
  int64_t width(const gpu::Op& op, bool* even, bool* aligned) {
    bool load = op.kind == GpuOpKind::LOAD;
    ValueId ptrs = op.operands[0];
    ValueId data = load ? op.result() : op.operands[1];
    const gpu::Layout& l = f.layout_of(load ? data : ptrs);
    DType d = f.value(ptrs).dtype;
    bool listed = false;
    for (DType t : target.vector_dtypes) listed = listed || t == d;
    int64_t chunk = chunk_regs(l);
    if (!listed || chunk < 2) return 0;
    int64_t v = chunk;
    while (v > 1 && static_cast<int64_t>(dtype_size(d)) * v > target.vector_bytes) v /= 2;
    for (; v >= 2; v /= 2) {
      if (chunk % v != 0 || !chunk_aligned(l, v)) continue;
      const Info& in = analysis(v).info(ptrs);
      if (in.kind == Info::contig) {
        *even = in.even;
        *aligned = in.aligned && f.value(ptrs).space == AddrSpace::threadgroup;
        return v;
      }
    }
    return 0;
  }

  void visit_block(gpu::Block& b, bool in_loop) {
    for (gpu::Op& op : b.ops) {
      visit(op, in_loop);
      for (gpu::Block& r : op.regions) visit_block(r, in_loop || op.kind == GpuOpKind::FOR);
    }
  }

  void visit(gpu::Op& op, bool in_loop) {
    if (op.kind != GpuOpKind::LOAD && op.kind != GpuOpKind::STORE) return;
    // The value layout must be the tile's (not a uniform stored through tile pointers).
    if (op.kind == GpuOpKind::STORE && f.value(op.operands[1]).layout != f.value(op.operands[0]).layout)
      return;
    bool even = false, aligned = false;
    if (int64_t w = width(op, &even, &aligned)) {
      op.kind = op.kind == GpuOpKind::LOAD ? GpuOpKind::VLOAD : GpuOpKind::VSTORE;
      op.attrs = {{"width", w}};
      if (aligned && in_loop) op.attrs.push_back({"aligned", int64_t{1}});
      else if (even && one_align && regs_of(op) > w) op.attrs.push_back({"one_align", int64_t{1}});
    }
  }
};

}  // namespace

void vectorize_access(gpu::Function& f, const PassContext& ctx) {
  Vectorizer vz{f, ctx.target, ctx.one_align, {}, {}, {}};
  vz.collect(f.body);
  vz.visit_block(f.body, false);
}

}  // namespace metile
