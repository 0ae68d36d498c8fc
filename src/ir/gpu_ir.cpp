#include "ir/gpu_ir.h"

#include <map>
#include <set>
#include <sstream>

#include "ir/pointer_provenance.h"
#include "support/error.h"

namespace metile::gpu {

namespace {

struct OpRow {
  std::string_view name;
  uint32_t traits;
};

const OpRow kRows[] = {
#define GPU_OP(E, name, traits) {#name, traits},
#include "ir/gpu_ops.def"
};

}  // namespace

std::string_view builtin_name(Builtin b) {
  static constexpr std::string_view kNames[kBuiltinCount] = {
      "thread_index", "simd_lane", "simdgroup_index", "threadgroup_position", "threadgroups_per_grid"};
  size_t i = static_cast<size_t>(b);
  return i < kBuiltinCount ? kNames[i] : "?";
}

std::string_view gpu_op_name(GpuOpKind k) { return kRows[static_cast<size_t>(k)].name; }
uint32_t gpu_op_traits(GpuOpKind k) { return kRows[static_cast<size_t>(k)].traits; }

std::string Layout::str() const {
  if (kind == Kind::uniform) return "uniform";
  if (kind == Kind::thread) return "thread";
  return cat("tile<", numel, "> thr=", thr.str(), " reg=", reg.str(), padded ? " padded" : "");
}

Layout tile_layout(int64_t numel, metile::Layout thr, metile::Layout reg) {
  Layout l;
  l.kind = Layout::Kind::tile;
  l.numel = numel;
  l.thr = coalesce(thr);
  l.reg = coalesce(reg);
  return l;
}

const AttrValue* Op::find_attr(std::string_view name) const {
  return metile::find_attr(attrs, name);
}
void Op::set_attr(std::string_view name, AttrValue v) { metile::set_attr(attrs, name, std::move(v)); }
int64_t Op::attr_int(std::string_view name) const {
  return metile::attr_int(attrs, name, gpu_op_name(kind));
}
double Op::attr_num(std::string_view name) const {
  return metile::attr_num(attrs, name, gpu_op_name(kind));
}
const std::string& Op::attr_str(std::string_view name) const {
  return metile::attr_str(attrs, name, gpu_op_name(kind));
}

Function::Function() {
  layouts.push_back(Layout{});  // kUniform
  Layout thread;
  thread.kind = Layout::Kind::thread;
  layouts.push_back(thread);
}

ValueId Function::new_value(Value v) {
  values.push_back(std::move(v));
  return static_cast<ValueId>(values.size() - 1);
}

LayoutId Function::add_layout(Layout l) {
  METILE_ASSERT(l.is_tile(), "only tile layouts are added");
  for (LayoutId i = 0; i < layouts.size(); ++i)
    if (layouts[i] == l) return i;
  int64_t numel = l.numel;
  int64_t nthr = l.thr.size();
  l.padded = false;
  for (int64_t t = 0; t < nthr && !l.padded; ++t)
    for (int64_t r = 0; r < l.regs() && !l.padded; ++r) l.padded = l.element(t, r) >= numel;
  layouts.push_back(std::move(l));
  return static_cast<LayoutId>(layouts.size() - 1);
}

namespace {

// The pointers GPU IR carries on besides Tile IR's: a splat, or registers renamed within a thread.
OperandRange gpu_pointer_sources(const Op& op) {
  if (op.kind == GpuOpKind::ELEMENTWISE) return pointer_sources(op.tile_op);
  if (op.kind == GpuOpKind::SPLAT || op.kind == GpuOpKind::REG_GATHER) return {0, 1};
  return {};
}

std::vector<uint64_t> masks_from(const Function& f, const std::vector<ValueId>& roots) {
  return pointer_params(f.values.size(), roots, f.body, gpu_pointer_sources,
                        [](const Op& op) { return op.kind == GpuOpKind::FOR; });
}

}  // namespace

std::vector<uint64_t> param_masks(const Function& f) {
  std::vector<ValueId> params;
  for (const auto& prm : f.params) params.push_back(prm.value);
  return masks_from(f, params);
}

std::vector<uint64_t> array_masks(const Function& f) {
  std::vector<ValueId> allocs;
  for (const Op& op : f.body.ops)
    if (op.kind == GpuOpKind::ALLOC) allocs.push_back(op.result());
  return masks_from(f, allocs);
}

std::vector<int> use_counts(const Function& f) {
  std::vector<int> n(f.values.size(), 0);
  walk(f.body, [&](const Op& op) {
    for (ValueId v : op.operands) ++n[v];
  });
  return n;
}

std::vector<std::string> name_values(const Function& f,
                                     const std::vector<std::string>& reserved) {
  std::set<std::string> taken(reserved.begin(), reserved.end());
  std::vector<std::string> names(f.values.size());
  // Per stem, the suffix to try next: names are only ever added, so every smaller one is still
  // taken (searching from 1 each time made 10k values of one stem quadratic).
  std::map<std::string, int> next_suffix;
  auto claim = [&](ValueId v, std::string stem) {
    if (stem.empty()) stem = "t";
    std::string n = stem;
    // A stem that ends in a digit would make "x1" + "2" ambiguous, hence the underscore.
    std::string sep = isdigit(static_cast<unsigned char>(stem.back())) ? "_" : "";
    int& i = next_suffix.emplace(stem, 1).first->second;
    for (; taken.count(n); ++i) n = stem + sep + std::to_string(i);
    taken.insert(n);
    names[v] = n;
  };
  for (const GpuParam& p : f.params) claim(p.value, p.name);
  auto visit = [&](const Block& b, auto& self) -> void {
    for (ValueId a : b.args) claim(a, f.value(a).stem);
    for (const Op& op : b.ops) {
      for (const Block& r : op.regions) self(r, self);  // a loop's body reads before its results
      for (ValueId r : op.results) claim(r, f.value(r).stem);
    }
  };
  visit(f.body, visit);
  return names;
}

int launch_threads(const Function& f) {
  for (const Op& op : f.body.ops)
    if (op.kind == GpuOpKind::WARP_SPECIALIZE) return f.threads + static_cast<int>(op.attr_int("producers"));
  return f.threads;
}

Op role_barrier(const Function& f, const Op& specialize, size_t role) {
  Op bar;
  bar.kind = GpuOpKind::BARRIER;
  bar.attrs = {{"id", int64_t{role == 0 ? 2 : 1}},
               {"threads", role == 0 ? specialize.attr_int("producers") : int64_t{f.threads}}};
  bar.loc = specialize.loc;
  return bar;
}

Block* loop_back_edge(Op& op) {
  if (op.kind == GpuOpKind::FOR) return &op.body();
  return op.kind == GpuOpKind::WHILE ? &op.regions.at(1) : nullptr;
}

SharedArray SharedArray::padded(std::vector<int64_t> shape, int64_t pad, int64_t stages) {
  SharedArray a;
  a.shape = std::move(shape);
  a.stages = stages;
  a.layout = pad > 0 ? Layout::pad : Layout::linear;
  a.layout_arg = pad;
  return a;
}

SharedArray SharedArray::swizzled(std::vector<int64_t> shape, int64_t swizzle, int64_t stages) {
  SharedArray a;
  a.shape = std::move(shape);
  a.stages = stages;
  a.layout = Layout::swizzle;
  a.layout_arg = swizzle;
  return a;
}

int64_t SharedArray::stage_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (layout == Layout::pad) n += layout_arg * (n / shape.back());  // one pad per row
  return n;
}

std::string SharedArray::layout_name() const {
  switch (layout) {
    case Layout::linear: return "linear";
    case Layout::pad: return cat("pad", layout_arg);
    case Layout::swizzle: return cat("swizzle", layout_arg);
  }
  return "";
}

void SharedArray::write(Op& alloc) const {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  std::vector<Attr> attrs = {{"shape", s}, {"stages", stages}, {"layout", layout_name()}};
  if (offset >= 0) attrs.push_back({"offset", offset});
  if (const AttrValue* row = alloc.find_attr("row")) attrs.push_back({"row", *row});
  alloc.attrs = std::move(attrs);
}

SharedArray shared_array(const Function& f, const Op& alloc, std::string* why) {
  std::string problem;
  SharedArray a;
  auto text = [&](const char* name) -> std::string {
    const AttrValue* v = alloc.find_attr(name);
    if (v == nullptr || !std::holds_alternative<std::string>(*v)) {
      if (problem.empty()) problem = cat("needs a text attribute ", name);
      return "";
    }
    return std::get<std::string>(*v);
  };
  auto number = [&](const char* name, int64_t otherwise) -> int64_t {
    const AttrValue* v = alloc.find_attr(name);
    if (v == nullptr) return otherwise;
    if (!std::holds_alternative<int64_t>(*v)) {
      if (problem.empty()) problem = cat("attribute ", name, " must be an integer");
      return otherwise;
    }
    return std::get<int64_t>(*v);
  };
  // "64x32": positive extents separated by x.
  const std::string shape = text("shape");
  for (size_t at = 0; problem.empty() && at <= shape.size();) {
    size_t end = shape.find('x', at);
    if (end == std::string::npos) end = shape.size();
    const std::string part = shape.substr(at, end - at);
    const bool digits = !part.empty() && part.size() < 12 &&
                        part.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoll(part) <= 0) problem = cat("shape \"", shape, "\" must be positive extents joined by x");
    else a.shape.push_back(std::stoll(part));
    at = end + 1;
  }
  a.stages = number("stages", 1);
  if (problem.empty() && a.stages <= 0) problem = "stages must be positive";
  const std::string layout = text("layout");
  auto suffix = [&](std::string_view head) -> int64_t {
    const std::string rest = layout.substr(head.size());
    if (rest.empty() || rest.size() > 6 || rest.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoll(rest);
  };
  if (!problem.empty()) {
  } else if (layout == "linear") {
    a.layout = SharedArray::Layout::linear;
  } else if (layout.rfind("pad", 0) == 0 && suffix("pad") > 0) {
    a.layout = SharedArray::Layout::pad;
    a.layout_arg = suffix("pad");
  } else if (layout.rfind("swizzle", 0) == 0 &&
             (suffix("swizzle") == 128 || suffix("swizzle") == 64 || suffix("swizzle") == 32)) {
    a.layout = SharedArray::Layout::swizzle;
    a.layout_arg = suffix("swizzle");
    const int64_t elem = static_cast<int64_t>(dtype_size(f.value(alloc.result()).dtype));
    if (a.shape.size() != 2 || (a.shape[1] * elem) % a.layout_arg != 0)
      problem = cat("a ", layout, " array needs two extents, rows of whole ", a.layout_arg, "-byte blocks");
  } else {
    problem = cat("layout \"", layout, "\" is none of linear, padN, swizzle128/64/32");
  }
  a.offset = number("offset", -1);
  if (problem.empty() && alloc.find_attr("offset") != nullptr &&
      (a.offset < 0 || static_cast<uint64_t>(a.offset) % a.alignment() != 0))
    problem = cat("offset ", a.offset, " is not a multiple of the ", a.alignment(), "-byte alignment");
  for (const Attr& at : alloc.attrs)
    if (problem.empty() && at.name != "shape" && at.name != "stages" && at.name != "layout" && at.name != "offset" &&
        at.name != "row")
      problem = cat("unknown attribute ", at.name);
  if (!problem.empty()) {
    if (why != nullptr) *why = problem;
    else fail(METILE_ERROR_INTERNAL, "gpu-ir", "alloc: ", problem);
  }
  return a;
}

uint64_t threadgroup_bytes(const Function& f) {
  uint64_t end = 0;
  for (const Op& op : f.body.ops)
    if (op.kind == GpuOpKind::ALLOC) {
      const SharedArray a = shared_array(f, op);
      METILE_ASSERT(a.offset >= 0, "threadgroup_bytes before allocate-threadgroup-memory placed the arrays");
      end = std::max(end, static_cast<uint64_t>(a.offset) + a.bytes(f.value(op.result()).dtype));
    }
  return align_threadgroup(end);
}

// ----- GpuBuilder -----

ValueId GpuBuilder::new_value(DType d, LayoutId layout, bool is_ptr, AddrSpace space) {
  Value v;
  v.dtype = d;
  v.layout = layout;
  v.is_ptr = is_ptr;
  v.space = space;
  return f_.new_value(std::move(v));
}

Op& GpuBuilder::append(Op op) {
  op.loc = loc_;
  block_->ops.push_back(std::move(op));
  return block_->ops.back();
}

ValueId GpuBuilder::named(ValueId v, const std::string& stem) {
  f_.value(v).stem = stem;
  return v;
}

LayoutId GpuBuilder::join(const std::vector<ValueId>& operands) const {
  LayoutId out = kUniform;
  for (ValueId v : operands) {
    LayoutId l = f_.value(v).layout;
    if (l == kUniform) continue;
    if (l == kThread) {
      if (out == kUniform) out = kThread;
      continue;
    }
    METILE_ASSERT(out == kUniform || out == kThread || out == l,
                  "per-register operands with different layouts: ", f_.layout(out).str(), " vs ",
                  f_.layout(l).str());
    out = l;
  }
  return out;
}

ValueId GpuBuilder::constant_int(DType d, int64_t v) {
  Op op;
  op.kind = GpuOpKind::CONST;
  op.attrs = {{"value", v}};
  op.results = {named(new_value(d, kUniform), "c")};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::constant_float(DType d, double v) {
  Op op;
  op.kind = GpuOpKind::CONST;
  op.attrs = {{"value", v}};
  op.results = {named(new_value(d, kUniform), "c")};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::builtin(Builtin which, int axis, LayoutId layout) {
  Op op;
  op.kind = GpuOpKind::BUILTIN;
  op.builtin = which;
  op.attrs = {{"axis", int64_t{axis}}};
  op.results = {new_value(DType::i32, layout)};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::ew(OpKind k, std::vector<ValueId> operands, DType cast_to) {
  METILE_ASSERT(is_elementwise(k) || k == OpKind::SELECT || k == OpKind::PTR_OFFSET,
                "not element-wise: ", op_name(k));
  LayoutId layout = join(operands);
  const Value& a = f_.value(operands.at(0));
  ValueId r;
  if (has_trait(k, kCompare)) r = new_value(DType::boolean, layout);
  else if (k == OpKind::CAST || k == OpKind::BITCAST) r = new_value(cast_to, layout);
  else if (k == OpKind::PTR_OFFSET) r = new_value(a.dtype, layout, true, a.space);
  else if (k == OpKind::SELECT) {
    const Value& b = f_.value(operands.at(1));
    r = new_value(b.dtype, layout, b.is_ptr, b.space);
  } else {
    r = new_value(a.dtype, layout);
  }
  Op op;
  op.kind = GpuOpKind::ELEMENTWISE;
  op.tile_op = k;
  op.operands = std::move(operands);
  op.results = {r};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::coord(LayoutId layout, ValueId tid) {
  Op op;
  op.kind = GpuOpKind::COORD;
  op.operands = {tid};
  op.results = {new_value(DType::i32, layout)};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::valid(LayoutId layout, ValueId tid) {
  Op op;
  op.kind = GpuOpKind::VALID;
  op.operands = {tid};
  op.results = {new_value(DType::boolean, layout)};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::splat(ValueId x, LayoutId layout) {
  const Value& v = f_.value(x);
  Op op;
  op.kind = GpuOpKind::SPLAT;
  op.operands = {x};
  op.results = {new_value(v.dtype, layout, v.is_ptr, v.space)};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::load(ValueId ptrs, ValueId pred, ValueId other) {
  Op op;
  op.kind = GpuOpKind::LOAD;
  op.operands = {ptrs};
  if (pred != kNoValue) op.operands.insert(op.operands.end(), {pred, other});
  op.results = {new_value(f_.value(ptrs).dtype, join(op.operands))};
  return append(std::move(op)).result();
}

void GpuBuilder::store(ValueId ptrs, ValueId value, ValueId pred) {
  Op op;
  op.kind = GpuOpKind::STORE;
  op.operands = {ptrs, value};
  if (pred != kNoValue) op.operands.push_back(pred);
  append(std::move(op));
}

void GpuBuilder::print(ValueId pred, const std::vector<ValueId>& pid, ValueId i, ValueId j,
                       ValueId value, const std::string& head, const std::string& label,
                       int64_t rank) {
  Op op;
  op.kind = GpuOpKind::PRINT;
  op.operands = {pred, pid.at(0), pid.at(1), pid.at(2), i, j, value};
  op.attrs = {{"head", head}, {"label", label}, {"rank", rank}};
  append(std::move(op));
}

ValueId GpuBuilder::atomic(OpKind k, ValueId ptrs, ValueId cmp, ValueId value, ValueId pred) {
  Op op;
  op.kind = GpuOpKind::ATOMIC;
  op.tile_op = k;
  op.operands = {ptrs};
  if (cmp != kNoValue) op.operands.push_back(cmp);
  op.operands.push_back(value);
  if (pred != kNoValue) op.operands.push_back(pred);
  op.results = {new_value(f_.value(ptrs).dtype, join(op.operands))};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::alloc(DType d, const SharedArray& array, const std::string& stem) {
  Op op;
  op.kind = GpuOpKind::ALLOC;
  array.write(op);
  op.results = {new_value(d, kUniform, true, AddrSpace::threadgroup)};
  named(op.results[0], stem);
  return append(std::move(op)).result();
}

void GpuBuilder::barrier() {
  Op op;
  op.kind = GpuOpKind::BARRIER;
  append(std::move(op));
}

ValueId GpuBuilder::shuffle_xor(ValueId x, ValueId mask) {
  Op op;
  op.kind = GpuOpKind::SHUFFLE_XOR;
  op.operands = {x, mask};
  op.results = {new_value(f_.value(x).dtype, f_.value(x).layout)};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::shuffle(ValueId x, ValueId lane) {
  Op op;
  op.kind = GpuOpKind::SHUFFLE;
  op.operands = {x, lane};
  op.results = {new_value(f_.value(x).dtype, f_.value(x).layout)};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::simd_reduce(Reduction reduce, ValueId x, bool uniform, int64_t lanes) {
  Op op;
  op.kind = GpuOpKind::SIMD_REDUCE;
  op.reduce = reduce;
  op.operands = {x};
  if (lanes != 0) op.attrs.push_back({"lanes", lanes});
  op.results = {new_value(f_.value(x).dtype, uniform ? kUniform : kThread)};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::reg_fold(Reduction reduce, ValueId x, LayoutId out, const std::vector<int64_t>& fold) {
  Op op;
  op.kind = GpuOpKind::REG_REDUCE;
  op.reduce = reduce;
  op.operands = {x};
  op.attrs = {{"fold", register_list(fold)}};
  op.results = {new_value(f_.value(x).dtype, out)};
  return append(std::move(op)).result();
}

ValueId GpuBuilder::reg_gather(ValueId x, LayoutId out, const std::vector<int64_t>& from) {
  Op op;
  op.kind = GpuOpKind::REG_GATHER;
  op.operands = {x};
  op.attrs = {{"from", register_list(from)}};
  op.results = {new_value(f_.value(x).dtype, out, f_.value(x).is_ptr, f_.value(x).space)};
  return append(std::move(op)).result();
}

std::string register_list(const std::vector<int64_t>& regs) {
  std::string s;
  for (int64_t r : regs) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

std::vector<int64_t> parse_register_list(const std::string& text, std::string_view what) {
  std::vector<int64_t> out;
  int64_t cur = -1;
  for (char c : text) {
    if (c >= '0' && c <= '9' && cur < (int64_t{1} << 40)) {
      cur = (cur < 0 ? 0 : cur * 10) + (c - '0');
    } else if (c == ',' && cur >= 0) {
      out.push_back(cur);
      cur = -1;
    } else {
      fail(METILE_ERROR_INVALID_PROGRAM, "gpu_ir", what, ": \"", text, "\" is not a register list");
    }
  }
  if (cur < 0) fail(METILE_ERROR_INVALID_PROGRAM, "gpu_ir", what, ": \"", text, "\" is not a register list");
  out.push_back(cur);
  return out;
}

ValueId GpuBuilder::reg_reduce(Reduction reduce, ValueId x) {
  Op op;
  op.kind = GpuOpKind::REG_REDUCE;
  op.reduce = reduce;
  op.operands = {x};
  op.results = {new_value(f_.value(x).dtype, kThread)};
  return append(std::move(op)).result();
}

}  // namespace metile::gpu
