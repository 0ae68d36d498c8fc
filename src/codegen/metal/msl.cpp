// The MSL dialect: the c_like spelling table for Metal and the GpuDialect hooks (entry point,
// builtins, address spaces, barriers, simd functions, packed vector types).
#include "codegen/metal/msl.h"

#include "codegen/gpu_emit.h"
#include "support/embedded.h"
#include "support/error.h"

namespace metile {

namespace {

const Dialect& msl_dialect() {
  static const Dialect d = [] {
    Dialect x;
    x.name = "msl";
    auto type = [&](DType t, const char* name) {
      x.value_type[static_cast<size_t>(t)] = name;
      x.storage_type[static_cast<size_t>(t)] = name;
    };
    type(DType::f32, "float");
    type(DType::f16, "half");
    type(DType::bf16, "bfloat");
    type(DType::i32, "int");
    type(DType::u32, "uint");
    type(DType::i64, "long");
    type(DType::boolean, "bool");
    // A bool in memory is a byte; any non-zero byte reads as true (a caller's buffer may hold
    // other bytes than 0 and 1, which a `bool` load would pass on raw).
    x.storage_type[static_cast<size_t>(DType::boolean)] = "uchar";
    x.load_from_storage[static_cast<size_t>(DType::boolean)] = "({} != 0)";
    x.store_to_storage[static_cast<size_t>(DType::boolean)] = "uchar({})";
    type(DType::i8, "char");
    type(DType::u8, "uchar");
    // half arithmetic is native (IEEE, correctly rounded); bfloat computes in float.
    x.compute_type[static_cast<size_t>(DType::f32)] = "float";
    x.compute_type[static_cast<size_t>(DType::f16)] = "half";
    x.compute_type[static_cast<size_t>(DType::bf16)] = "float";
    x.round_to[static_cast<size_t>(DType::bf16)] = "bfloat({})";
    // MSL has no FP8 type: float values, byte patterns in memory, float8.h converts.
    auto f8 = [&](DType t, const char* name) {
      const size_t i = static_cast<size_t>(t);
      x.value_type[i] = x.compute_type[i] = "float";
      x.storage_type[i] = "uchar";
      x.load_from_storage[i] = std::string("mt_") + name + "_to_f32({})";
      x.store_to_storage[i] = std::string("mt_f32_to_") + name + "({})";
      x.round_to[i] = std::string("mt_round_") + name + "({})";
    };
    f8(DType::f8e4m3, "f8e4m3");
    f8(DType::f8e5m2, "f8e5m2");
    set_math_functions(x, MathColumn::msl);
    auto lit = [&](DType t, const char* p) { x.int_literal[static_cast<size_t>(t)] = p; };
    lit(DType::i32, "{}");
    lit(DType::u32, "{}u");
    lit(DType::i64, "{}l");
    lit(DType::i8, "char({})");
    lit(DType::u8, "uchar({})");
    x.inf_f32 = "INFINITY";
    x.nan_f32 = "NAN";
    x.cast = "{t}({})";
    x.bitcast = "as_type<{t}>({})";
    x.kernel_qualifier = "[[kernel]]";
    x.inline_qualifier = "inline";
    x.address_space = {"device", "threadgroup"};
    return x;
  }();
  return d;
}

// Builtin parameters, with the short names Metal kernels conventionally give them.
struct BuiltinParam {
  gpu::Builtin ir;
  const char* param;  // parameter name
  const char* type;
  metal_sim::MslBuiltin attr;
};
const BuiltinParam kBuiltins[] = {
    {gpu::Builtin::threadgroup_position, "tgpig", "uint3", metal_sim::MslBuiltin::threadgroup_position_in_grid},
    {gpu::Builtin::threadgroups_per_grid, "tgpg", "uint3", metal_sim::MslBuiltin::threadgroups_per_grid},
    {gpu::Builtin::thread_index, "tiitg", "uint", metal_sim::MslBuiltin::thread_index_in_threadgroup},
    {gpu::Builtin::simd_lane, "tiisg", "uint", metal_sim::MslBuiltin::thread_index_in_simdgroup},
    {gpu::Builtin::simdgroup_index, "sgitg", "uint", metal_sim::MslBuiltin::simdgroup_index_in_threadgroup},
};

const BuiltinParam& builtin_param(metal_sim::MslBuiltin attr) {
  for (const BuiltinParam& b : kBuiltins)
    if (b.attr == attr) return b;
  fail(METILE_ERROR_INTERNAL, "msl", "no parameter for builtin ", metal_sim::builtin_name(attr));
}

using metal_sim::MslArg;

// Every scalar parameter (the user's and the extents the bounds guard adds) is a member of one
// `constant` struct bound after the pointers, so a kernel's scalars take one of Metal's 31
// buffer bindings, not one each. The mt_ prefix is reserved: user names never take it.
constexpr const char* kPackedStruct = "mt_scalars";
constexpr const char* kPackedParam = "mt_s";
// The host's stop word, after every other buffer (KernelInterface::cancel), and the thread index
// its check reads (kBuiltins' parameter for thread_index).
constexpr const char* kStopParam = "mt_cancel";
constexpr const char* kThreadIndexParam = "tiitg";

/** The kernel's parameters as its signature lists them (see MslSignature): pointers at
 * [[buffer(i)]] in parameter order with the scalars' members among them, the packed struct
 * after the pointers, threadgroup arrays, builtins. Fails when the buffers exceed Metal's 31. */
std::vector<MslArg> signature_args(const KernelInterface& k) {
  std::vector<MslArg> out;
  int buffers = 0, pointers = 0, scalars = 0;
  for (const KernelInterface::Param& p : k.params) {
    if (p.is_ptr) {
      out.push_back(MslArg::buffer(p.name, buffers++, p.dtype, !p.written));
      ++pointers;
    } else {
      out.push_back(MslArg::member(p.name, p.dtype));
      ++scalars;
    }
  }
  if (scalars > 0) out.push_back(MslArg::packed(kPackedParam, buffers++, kPackedStruct));
  if (k.cancel) out.push_back(MslArg::stop_word(kStopParam, buffers++));
  if (buffers > metal_sim::kMaxBinding + 1) {
    std::vector<std::string> uses = {cat(pointers, " pointer parameters")};
    if (scalars > 0) uses.push_back("one for all its scalars");
    if (k.cancel) uses.push_back("one for the stop word its loops check");
    std::string listed = uses[0];
    for (size_t i = 1; i < uses.size(); ++i) listed += (i + 1 < uses.size() ? ", " : " and ") + uses[i];
    fail(METILE_ERROR_UNSUPPORTED, "metal", "kernel '", k.name, "' needs ", buffers,
         " buffer bindings (", listed, "), over Metal's ",
         metal_sim::kMaxBinding + 1, "; pointer parameters include the ones metile adds (the "
         "bounds-check error flag, split_k's ticket counters and workspace)");
  }
  int group = 0;
  for (const KernelInterface::Shared& s : k.shared)
    out.push_back(MslArg::threadgroup(s.name, group++, s.dtype, static_cast<uint64_t>(s.size)));
  for (const BuiltinParam& b : kBuiltins)
    if (k.builtins.count(b.ir) || (k.cancel && b.ir == gpu::Builtin::thread_index))
      out.push_back(MslArg::builtin_arg(b.param, b.attr));
  return out;
}

bool native_simd(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::i32 || t == DType::u32;
}

class MslDialect final : public GpuDialect {
 public:
  MslDialect() : GpuDialect(msl_dialect()) {}

  std::vector<std::string> reserved() const override {
    std::vector<std::string> r = {
        "metal", "device", "constant", "threadgroup", "thread", "kernel", "half", "bfloat",
        "uint", "uchar", "ushort", "ulong", "rsqrt", "abs", "fmax", "fmin", "max", "min",
        "select", "isnan", "as_type", "simd_sum", "simd_max", "simd_min", "simd_shuffle_xor",
        "simd_broadcast", "threadgroup_barrier", "mem_flags", "INFINITY", "NAN",
        "simdgroup_float8x8", "simdgroup_half8x8", "simdgroup_load", "simdgroup_multiply_accumulate",
        "simdgroup_store", "simdgroup_barrier", "mpp", "tensor", "tensor_inline", "dextents", "array",
        "execution_simdgroup"};
    for (std::string& f : math_function_names(MathColumn::msl)) r.push_back(std::move(f));
    for (const BuiltinParam& b : kBuiltins) r.push_back(b.param);
    return r;
  }

  // tensor_ops needs Metal 4's headers: <metal_tensor> for tensor/cooperative_tensor and
  // MetalPerformancePrimitives for mpp::tensor_ops::matmul2d; older SDKs lack both, so only
  // kernels with a tensor_ops mma include them.
  std::string prelude(const PreludeUses& uses) const override {
    std::string s = "#include <metal_stdlib>\n";
    if (uses.atoms.count(AtomKind::tensor_ops))
      s += "#include <metal_tensor>\n#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>\n";
    s += "using namespace metal;\n\n";
    s += embedded_file("msl_prelude.h");
    s += "\n" + std::string(embedded_file("gpu_integer.h"));
    if (uses.float8)  // FP8 conversions over MSL's bit casts
      s += "\ninline uint mt_f32_bits(float f) { return as_type<uint>(f); }\n"
           "inline float mt_bits_f32(uint u) { return as_type<float>(u); }\n" +
           std::string(embedded_file("float8.h"));
    if (uses.swizzle) s += "\n" + std::string(embedded_file("swizzle.h"));
    if (uses.cancel)
      // The host's stop word (docs/semantics.md, "Stopping a launch"). Metal has no trap, and a
      // thread that left alone would strand the others at their next barrier, so the group
      // decides together: thread 0 reads the word, every thread takes that one value from
      // threadgroup memory, and all return or all go on. The second barrier keeps thread 0
      // from overwriting `seen` at the next check before every thread read it. A group that
      // stops answers 2, so the host tells a stopped launch from a finished one.
      s += "\ninline bool mt_stop_requested(device atomic<uint>* word, threadgroup uint* seen, uint index) {\n"
           "  if (index == 0u) *seen = atomic_load_explicit(word, memory_order_relaxed);\n"
           "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
           "  const bool stop = *seen != 0u;\n"
           "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
           "  if (stop && index == 0u) atomic_store_explicit(word, 2u, memory_order_relaxed);\n"
           "  return stop;\n"
           "}\n";
    return s + "\n";
  }

  // Loops are thread-uniform (gpu_ir.h), so every thread counts the same turns and reaches each
  // check together: the barriers inside it are legal, and the whole group returns at once. The
  // counter counts down (a decrement and a branch per turn) from 1, so the first back-edge
  // checks too, then every `every`-th: no GPU reset ends the programs of a huge grid that are
  // still to run, so each of them stops after one turn, not `every`.
  std::string cancel_prologue() const override {
    return "uint mt_polls = 1u;  threadgroup uint mt_stop_seen;";
  }
  std::string cancel_check(int64_t every) const override {
    // every=0 (an entry check; apple targets place none: GpuTarget::cancel_at_entry) checks once.
    if (every == 0)
      return std::string("if (mt_stop_requested(") + kStopParam + ", &mt_stop_seen, " + kThreadIndexParam + ")) return;";
    return "if (--mt_polls == 0u) { mt_polls = " + std::to_string(every) + "u; if (mt_stop_requested(" +
           kStopParam + ", &mt_stop_seen, " + kThreadIndexParam + ")) return; }";
  }

  std::string text_array(const std::string& name, const std::string& text) const override {
    return "constant char " + name + "[] = " + byte_initializer(text) + ";";
  }

  std::string print_prelude() const override {
    // Only metal-sim prints (lowering refuses device_print for metal): its shim compiles the
    // kernel as host C++, where printf writes to the process's stdout.
    return "\n#include <stdio.h>\n#define METILE_PRINT_FLUSH() fflush(stdout)\n" +
           std::string(embedded_file("device_print.h")) + "\n";
  }

  void open_kernel(SourceWriter& w, const KernelInterface& k) const override {
    std::vector<MslArg> args = signature_args(k);
    std::vector<std::string> params, members;
    for (const MslArg& a : args) {
      const std::string binding = "(" + std::to_string(a.binding) + ")]]";
      switch (a.kind) {
        case MslArg::Kind::buffer:
          params.push_back(pointer(a.dtype, AddrSpace::device, a.is_const) + " " + a.name + " [[buffer" + binding);
          break;
        case MslArg::Kind::member:
          members.push_back(c.storage(a.dtype) + " " + a.name + ";");
          break;
        case MslArg::Kind::packed:
          params.push_back("constant " + a.struct_name + "& " + a.name + " [[buffer" + binding);
          break;
        case MslArg::Kind::stop:
          params.push_back("device atomic<uint>* " + a.name + " [[buffer" + binding);
          break;
        case MslArg::Kind::threadgroup:
          params.push_back("threadgroup " + c.storage(a.dtype) + "* " + a.name + " [[threadgroup" + binding);
          break;
        case MslArg::Kind::builtin:
          params.push_back(std::string(builtin_param(a.builtin).type) + " " + a.name + " [[" +
                           metal_sim::builtin_name(a.builtin) + "]]");
          break;
        case MslArg::Kind::scalar:
          break;  // signature_args packs every scalar
      }
    }
    if (!members.empty()) {
      w.open("struct " + std::string(kPackedStruct));
      for (const std::string& m : members) w.line(m);
      w.close(";");
      w.line();
    }
    if (params.empty()) {
      w.open("[[kernel]] void " + k.name + "()");
      return;
    }
    w.line("[[kernel]] void " + k.name + "(");
    for (size_t i = 0; i + 1 < params.size(); ++i) w.line("    " + params[i] + ",");
    w.open("    " + params.back() + ")");
    for (const MslArg& a : args)
      if (a.kind == MslArg::Kind::member)
        w.line("const " + c.value(a.dtype) + " " + a.name + " = " +
               spell_from_storage(c, a.dtype, std::string(kPackedParam) + "." + a.name) + ";");
  }

  std::string builtin(gpu::Builtin which, int axis) const override {
    static const char* axes[] = {".x", ".y", ".z"};
    for (const BuiltinParam& b : kBuiltins)
      if (which == b.ir)
        return std::string("int(") + b.param + (std::string(b.type) == "uint3" ? axes[axis] : "") + ")";
    fail(METILE_ERROR_INTERNAL, "msl", "unknown builtin ", gpu::builtin_name(which));
  }

  std::string pointer(DType dtype, AddrSpace space, bool is_const) const override {
    if (space == AddrSpace::threadgroup) return "threadgroup " + c.storage(dtype) + "*";
    return std::string(is_const ? "device const " : "device ") + c.storage(dtype) + "*";
  }

  std::string barrier(bool device_memory) const override {
    return device_memory ? "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup)"
                         : "threadgroup_barrier(mem_flags::mem_threadgroup)";
  }

  std::string shuffle(bool xor_mask, DType t, const std::string& x,
                      const std::string& lane) const override {
    std::string fn = xor_mask ? "simd_shuffle_xor" : "simd_broadcast";
    std::string l = lane.find_first_not_of("0123456789") == std::string::npos ? lane : "ushort(" + lane + ")";
    auto call = [&](const std::string& v) { return fn + "(" + v + ", " + l + ")"; };
    switch (t) {
      case DType::boolean: return "bool(" + call("ushort(" + x + ")") + ")";
      case DType::i8: return "char(" + call("short(" + x + ")") + ")";
      case DType::u8: return "uchar(" + call("ushort(" + x + ")") + ")";
      case DType::i64: return "as_type<long>(" + call("as_type<uint2>(" + x + ")") + ")";
      case DType::bf16: return "as_type<bfloat>(" + call("as_type<ushort>(" + x + ")") + ")";
      default: return call(x);
    }
  }

  std::string simd_reduce(Reduction reduce, DType t, const std::string& x) const override {
    if (!native_simd(t)) return "";
    return "simd_" + std::string(reduction_name(reduce)) + "(" + x + ")";
  }

  std::string vector_type(DType t, int64_t width) const override {
    return c.storage(t) + std::to_string(width);
  }

  // Packed vectors need only element alignment, so any chunk start is a valid address.
  std::string vector_pointer(DType t, int64_t width, AddrSpace space, bool is_const) const override {
    std::string q = space == AddrSpace::threadgroup ? "threadgroup " : is_const ? "device const " : "device ";
    return q + "packed_" + vector_type(t, width) + "*";
  }

  std::string vector_aligned(const std::string&, int64_t) const override { return ""; }

  // simdgroup_matrix 8x8: each simdgroup keeps its tiles_m x tiles_n accumulator tiles as
  // matrices rebuilt from (and written back to) the fragment registers, and per 8-wide k step
  // loads one A matrix per row of tiles and one B matrix per column from threadgroup memory.
  void mma(SourceWriter& w, const MmaSpec& s) const override {
    if (s.atom == AtomKind::tensor_ops) return tensor_ops(w, s);
    if (s.b_kmajor) fail(METILE_ERROR_INTERNAL, "msl", "k-major B is a CUDA mma.sync operand form");
    const std::string tm = std::to_string(s.tiles_m()), tn = std::to_string(s.tiles_n());
    const std::string tiles = std::to_string(s.tiles_m() * s.tiles_n());
    const std::string in = s.ab == DType::f16 ? "simdgroup_half8x8" : "simdgroup_float8x8";
    const std::string lda = std::to_string(s.lda), ldb = std::to_string(s.ldb);
    w.line("const int mma_warp = " + s.tid + " / 32;");
    w.line("const int mma_row = (mma_warp % " + std::to_string(s.warps_m) + ") * " +
           std::to_string(s.m / s.warps_m) + ";");
    w.line("const int mma_col = (mma_warp / " + std::to_string(s.warps_m) + ") * " +
           std::to_string(s.n / s.warps_n) + ";");
    w.line("simdgroup_float8x8 mma_c[" + tiles + "];");
    w.open("for (int mma_i = 0; mma_i < " + tiles + "; ++mma_i)");
    w.line("mma_c[mma_i].thread_elements()[0] = " + s.acc + "[2 * mma_i];");
    w.line("mma_c[mma_i].thread_elements()[1] = " + s.acc + "[2 * mma_i + 1];");
    w.close();
    w.open("for (int mma_k = 0; mma_k < " + std::to_string(s.k) + "; mma_k += 8)");
    w.line(in + " mma_a[" + tm + "], mma_b[" + tn + "];");
    w.line("for (int mma_i = 0; mma_i < " + tm + "; ++mma_i) simdgroup_load(mma_a[mma_i], " + s.a +
           " + (mma_row + 8 * mma_i) * " + lda + " + mma_k, " + lda + ");");
    w.line("for (int mma_j = 0; mma_j < " + tn + "; ++mma_j) simdgroup_load(mma_b[mma_j], " + s.b +
           " + mma_k * " + ldb + " + mma_col + 8 * mma_j, " + ldb + ");");
    w.line("for (int mma_i = 0; mma_i < " + tm + "; ++mma_i)");
    w.line("  for (int mma_j = 0; mma_j < " + tn + "; ++mma_j)");
    w.line("    simdgroup_multiply_accumulate(mma_c[mma_i + " + tm + " * mma_j], mma_a[mma_i], "
           "mma_b[mma_j], mma_c[mma_i + " + tm + " * mma_j]);");
    w.close();
    w.open("for (int mma_i = 0; mma_i < " + tiles + "; ++mma_i)");
    w.line(s.acc + "[2 * mma_i] = mma_c[mma_i].thread_elements()[0];");
    w.line(s.acc + "[2 * mma_i + 1] = mma_c[mma_i].thread_elements()[1];");
    w.close();
  }

  // Metal 4 tensor_ops: each simdgroup runs one matmul2d (execution_simdgroup) over its warp
  // tile, A and B as tensor views of the staged threadgroup arrays, into a cooperative
  // destination tensor. Its layout over the lanes is implementation-defined, so the registers
  // (the 8x8 fragment layout) reach it through the f32 array c: each 8x8 tile goes out with
  // simdgroup_store, the cooperative tensor loads the warp tile, accumulates and stores it back,
  // and simdgroup_load brings the tiles home. Tensor extents are innermost first (columns, rows)
  // and strides {1, row stride}, as MetalPerformancePrimitives' MPPTensorOpsMatMul2d.h describes.
  void tensor_ops(SourceWriter& w, const MmaSpec& s) const {
    METILE_ASSERT(!s.c.empty() && s.atom_m == 8 && s.atom_n == 8,
                  "a tensor_ops mma has an accumulator array and 8x8 register tiles");
    const int64_t wtm = s.m / s.warps_m, wtn = s.n / s.warps_n;
    const std::string tm = std::to_string(s.tiles_m()), tiles = std::to_string(s.tiles_m() * s.tiles_n());
    const std::string n = std::to_string(s.n), in = c.storage(s.ab);
    auto view = [](const std::string& t, const std::string& at, int64_t cols, int64_t rows, int64_t ld) {
      return "tensor<threadgroup " + t + ", dextents<int32_t, 2>, tensor_inline>(" + at +
             ", dextents<int32_t, 2>(" + std::to_string(cols) + ", " + std::to_string(rows) +
             "), array<int32_t, 2>({1, " + std::to_string(ld) + "}))";
    };
    w.line("const int mma_warp = " + s.tid + " / 32;");
    w.line("const int mma_row = (mma_warp % " + std::to_string(s.warps_m) + ") * " + std::to_string(wtm) + ";");
    w.line("const int mma_col = (mma_warp / " + std::to_string(s.warps_m) + ") * " + std::to_string(wtn) + ";");
    w.line("threadgroup float* mma_tile = " + s.c + " + mma_row * " + n + " + mma_col;");
    w.open("for (int mma_i = 0; mma_i < " + tiles + "; ++mma_i)");
    w.line("simdgroup_float8x8 mma_f;");
    w.line("mma_f.thread_elements()[0] = " + s.acc + "[2 * mma_i];");
    w.line("mma_f.thread_elements()[1] = " + s.acc + "[2 * mma_i + 1];");
    w.line("simdgroup_store(mma_f, mma_tile + 8 * (mma_i % " + tm + ") * " + n + " + 8 * (mma_i / " + tm +
           "), " + n + ");");
    w.close();
    w.line("simdgroup_barrier(mem_flags::mem_threadgroup);");
    w.line("constexpr auto mma_desc = mpp::tensor_ops::matmul2d_descriptor(" + std::to_string(wtm) + ", " +
           std::to_string(wtn) + ", " + std::to_string(s.k) +
           ", false, false, false, mpp::tensor_ops::matmul2d_descriptor::mode::multiply_accumulate);");
    w.line("mpp::tensor_ops::matmul2d<mma_desc, execution_simdgroup> mma_op;");
    w.line("auto mma_ta = " + view(in, s.a + " + mma_row * " + std::to_string(s.lda), s.k, wtm, s.lda) + ";");
    w.line("auto mma_tb = " + view(in, s.b + " + mma_col", wtn, s.k, s.ldb) + ";");
    w.line("auto mma_tc = " + view("float", "mma_tile", wtn, wtm, s.n) + ";");
    w.line("auto mma_ct = mma_op.get_destination_cooperative_tensor<decltype(mma_ta), decltype(mma_tb), float>();");
    w.line("mma_ct.load(mma_tc);");
    w.line("mma_op.run(mma_ta, mma_tb, mma_ct);");
    w.line("mma_ct.store(mma_tc);");
    w.line("simdgroup_barrier(mem_flags::mem_threadgroup);");
    w.open("for (int mma_i = 0; mma_i < " + tiles + "; ++mma_i)");
    w.line("simdgroup_float8x8 mma_f;");
    w.line("simdgroup_load(mma_f, mma_tile + 8 * (mma_i % " + tm + ") * " + n + " + 8 * (mma_i / " + tm +
           "), " + n + ");");
    w.line(s.acc + "[2 * mma_i] = mma_f.thread_elements()[0];");
    w.line(s.acc + "[2 * mma_i + 1] = mma_f.thread_elements()[1];");
    w.close();
  }
};

}  // namespace

MslKernel emit_msl(const gpu::Function& f) {
  MslDialect dialect;
  KernelInterface k;
  MslKernel out;
  out.source = emit_gpu_kernel(f, dialect, &k);
  out.threads_per_group = k.threads;
  gpu::walk(f.body, [&](const gpu::Op& op) {
    if (op.kind == gpu::GpuOpKind::MMA && mma_atom_kind(op) == AtomKind::tensor_ops) out.language = "metal4.0";
  });
  out.signature.kernel = k.name;
  out.signature.args = signature_args(k);
  return out;
}

}  // namespace metile
