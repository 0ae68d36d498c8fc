// The CUDA dialect: the c_like spelling table for CUDA C++ and the GpuDialect hooks (entry
// point, builtins from threadIdx/blockIdx, dynamic shared memory, __syncthreads, warp shuffles
// over the lanes that exist, aligned element-array vectors).
#include "codegen/cuda/cuda.h"

#include <algorithm>

#include "codegen/gpu_emit.h"
#include "codegen/cuda/tma.h"
#include "codegen/cuda/wgmma.h"
#include "codegen/register_budget.h"
#include "support/embedded.h"
#include "support/error.h"

namespace metile {

namespace {

const Dialect& cuda_dialect() {
  static const Dialect d = [] {
    Dialect x;
    x.name = "cuda";
    auto set = [&](DType t, const char* value, const char* storage) {
      x.value_type[static_cast<size_t>(t)] = value;
      x.storage_type[static_cast<size_t>(t)] = storage;
      x.compute_type[static_cast<size_t>(t)] = value;
    };
    set(DType::f32, "float", "float");
    set(DType::f16, "float", "ushort");  // no cuda_fp16.h under NVRTC: f32 math, rounded
    set(DType::bf16, "float", "ushort");
    set(DType::i32, "int", "int");
    set(DType::u32, "uint", "uint");
    set(DType::i64, "llong", "llong");
    set(DType::boolean, "bool", "uchar");
    set(DType::i8, "signed char", "signed char");
    set(DType::u8, "uchar", "uchar");
    set(DType::f8e4m3, "float", "uchar");  // FP8: float values, float8.h converts
    set(DType::f8e5m2, "float", "uchar");
    auto narrow = [&](DType t, const char* load, const char* store, const char* round) {
      size_t i = static_cast<size_t>(t);
      x.load_from_storage[i] = load;
      x.store_to_storage[i] = store;
      x.round_to[i] = round;
    };
    narrow(DType::f16, "mt_f16_to_f32({})", "mt_f32_to_f16({})", "mt_round_f16({})");
    narrow(DType::bf16, "mt_bf16_to_f32({})", "mt_f32_to_bf16({})", "mt_round_bf16({})");
    narrow(DType::f8e4m3, "mt_f8e4m3_to_f32({})", "mt_f32_to_f8e4m3({})", "mt_round_f8e4m3({})");
    narrow(DType::f8e5m2, "mt_f8e5m2_to_f32({})", "mt_f32_to_f8e5m2({})", "mt_round_f8e5m2({})");
    // A bool in memory is a byte; any non-zero byte reads as true.
    narrow(DType::boolean, "({} != 0)", "((uchar)({}))", "");
    set_math_functions(x, MathColumn::cuda);
    auto lit = [&](DType t, const char* p) { x.int_literal[static_cast<size_t>(t)] = p; };
    lit(DType::i32, "{}");
    lit(DType::u32, "{}u");
    lit(DType::i64, "{}ll");
    lit(DType::i8, "((signed char){})");
    lit(DType::u8, "((uchar){})");
    x.inf_f32 = "__int_as_float(0x7f800000)";
    x.nan_f32 = "__int_as_float(0x7fffffff)";
    x.cast = "(({t})({}))";
    x.kernel_qualifier = "extern \"C\" __global__";
    x.restrict_qualifier = "__restrict__";
    x.inline_qualifier = "static __device__ __forceinline__";
    x.address_space = {"", ""};
    return x;
  }();
  return d;
}

struct BuiltinSpelling {
  gpu::Builtin ir;
  const char* expr;  // {} = axis letter
};
const BuiltinSpelling kCudaBuiltins[] = {
    {gpu::Builtin::threadgroup_position, "int(blockIdx.{})"},
    {gpu::Builtin::threadgroups_per_grid, "int(gridDim.{})"},
    {gpu::Builtin::thread_index, "int(threadIdx.x)"},
    {gpu::Builtin::simd_lane, "int(threadIdx.x & 31u)"},
    {gpu::Builtin::simdgroup_index, "int(threadIdx.x >> 5)"},
};


class CudaDialect final : public GpuDialect {
 public:
  CudaDialect() : GpuDialect(cuda_dialect()) {}

  std::vector<std::string> reserved() const override {
    std::vector<std::string> r = {
        "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "__syncthreads",
        "__shfl_sync", "__shfl_xor_sync", "fmaxf", "fminf", "uint", "ushort", "uchar", "llong",
        "ullong", "mt_smem", "mt_vec", "mt_warp_mask"};
    for (std::string& f : math_function_names(MathColumn::cuda)) r.push_back(std::move(f));
    return r;
  }

  std::string prelude(const PreludeUses& uses) const override {
    std::string s(embedded_file("cuda_prelude.h"));
    if (uses.atoms.count(AtomKind::wgmma)) s += "\n" + std::string(embedded_file("cuda_wgmma.h"));
    if (uses.tma) s += "\n" + std::string(embedded_file("cuda_tma.h"));
    if (uses.tma_3d) s += "\n" + std::string(embedded_file("cuda_tma_3d.h"));
    s += "\n" + std::string(embedded_file("gpu_integer.h"));
    // FP8 conversions in software (the same bits as every device; NVRTC has no cuda_fp8.h
    // without the toolkit's include path) over CUDA's bit casts.
    if (uses.float8)
      s += "\nMT_FN uint mt_f32_bits(float f) { return __float_as_uint(f); }\n"
           "MT_FN float mt_bits_f32(uint u) { return __uint_as_float(u); }\n" +
           std::string(embedded_file("float8.h"));
    if (uses.cancel)
      // The host's stop word (docs/semantics.md, "Stopping a launch"), read from its copy in GPU
      // memory `stop` (the host sets both): an L2 read, where the word itself, in host memory,
      // is a round trip over PCIe. .relaxed.gpu skips the SM's L1, which the host's write to the
      // copy does not reach. A program reads it once when it starts (mt_stop_read) and acts on
      // the value it read last at every loop back-edge (mt_cancel_check, which reads again
      // every 1024th) and at its entry check (mt_cancel_leave, after its first reads and before
      // its first write, where no loop comes first): the first read's latency hides behind
      // the program's own reads or first turn, so a program that starts after a stop leaves at
      // once for the cost of one L2 read per warp (and a loop's turn after a read waits for
      // it: one L2 latency per 1024 turns). A stopping thread answers 2 in the host
      // word (so the host knows the launch stopped here) and exits. A warp's threads read the
      // one word in one transaction (loops are thread-uniform), so they leave together; a
      // block's other warps may leave a check later, and a barrier does not wait for exited
      // threads. The launch then ends normally and the GPU's context stays usable (a trap would
      // end the launch too, but leaves the context broken until a reset). Predicated
      // instructions only, no branch: a divergent path in a K loop makes ptxas serialize the
      // loop's wgmma.
      s += "\n__device__ __forceinline__ unsigned int mt_stop_read(const unsigned int* stop) {\n"
           "  unsigned int v;\n"
           "  asm volatile(\"ld.relaxed.gpu.global.u32 %0, [%1];\" : \"=r\"(v) : \"l\"(stop));\n"
           "  return v;\n"
           "}\n"
           "__device__ __forceinline__ void mt_cancel_leave(unsigned int* word, unsigned int seen) {\n"
           "  asm volatile(\"{\\n .reg .pred stop;\\n setp.ne.u32 stop, %1, 0;\\n\"\n"
           "               \" @stop st.volatile.global.u32 [%0], 2;\\n @stop membar.sys;\\n @stop exit;\\n}\"\n"
           "               :: \"l\"(word), \"r\"(seen));\n"
           "}\n"
           "__device__ __forceinline__ void mt_cancel_check(unsigned int* word, const unsigned int* stop,\n"
           "                                                unsigned int& seen, unsigned int turn) {\n"
           "  asm volatile(\"{\\n .reg .pred check, stop;\\n setp.ne.u32 stop, %0, 0;\\n\"\n"
           "               \" @stop st.volatile.global.u32 [%1], 2;\\n @stop membar.sys;\\n @stop exit;\\n\"\n"
           "               \" setp.eq.u32 check, %3, 0;\\n @check ld.relaxed.gpu.global.u32 %0, [%2];\\n}\"\n"
           "               : \"+r\"(seen) : \"l\"(word), \"l\"(stop), \"r\"(turn));\n"
           "}\n";
    if (uses.swizzle) {
      s += "\n#define METILE_SWIZZLE_FN __device__ __forceinline__\n";
      s += std::string(embedded_file("swizzle.h"));
    }
    return s + "\n";
  }

  // Every thread acts at every back-edge and reads at the same turns (every `every`-th;
  // every=0: the entry check, no read); the program's first read of the word starts with it.
  std::string cancel_prologue() const override {
    return "unsigned int mt_polls = 0u;  unsigned int mt_stop_seen = mt_stop_read(mt_stop);";
  }
  std::string cancel_check(int64_t every) const override {
    if (every == 0) return "mt_cancel_leave(mt_cancel, mt_stop_seen);";
    return "mt_cancel_check(mt_cancel, mt_stop, mt_stop_seen, ++mt_polls & " + std::to_string(every - 1) + "u);";
  }

  std::string text_array(const std::string& name, const std::string& text) const override {
    return "__device__ const char " + name + "[] = " + byte_initializer(text) + ";";
  }

  std::string print_prelude() const override {
    // NVRTC declares printf; the lines reach the host at the next synchronization.
    return "\n#define METILE_PRINT_FN __device__ static\n" +
           std::string(embedded_file("device_print.h")) + "\n";
  }

  void open_kernel(SourceWriter& w, const KernelInterface& k) const override {
    std::vector<std::string> params;
    // Narrow-float and bool scalars arrive in their storage type, as mt_arg_<name>: mt_ names are
    // never a parameter's (c_identifier renames those), so no user name can collide with it.
    std::vector<std::string> unpack;
    for (const KernelInterface::Param& p : k.params) {
      if (p.is_ptr) {
        params.push_back(pointer(p.dtype, AddrSpace::device, !p.written) + " __restrict__ " + p.name);
      } else if (!c.load_from_storage[static_cast<size_t>(p.dtype)].empty()) {
        params.push_back(c.storage(p.dtype) + " mt_arg_" + p.name);
        unpack.push_back("const " + c.value(p.dtype) + " " + p.name + " = " +
                         spell_from_storage(c, p.dtype, "mt_arg_" + p.name) + ";");
      } else {
        params.push_back(c.storage(p.dtype) + " " + p.name);
      }
    }
    // TMA tensor maps by value, after every other parameter (the runtime appends them).
    for (size_t i = 0; i < k.tensor_maps.size(); ++i)
      params.push_back("const __grid_constant__ mt_tensor_map mt_tmap" + std::to_string(i));
    // The stop word and its copy in GPU memory last of all: the runtime appends them after the
    // maps, and a kernel without checks ignores the extra arguments.
    if (k.cancel) {
      params.push_back("unsigned int* mt_cancel");
      params.push_back("const unsigned int* mt_stop");
    }
    // A matrix kernel asks for as many blocks per multiprocessor as its registers allow
    // (register_budget.h): without the bound ptxas spends up to 255 registers (the
    // fragment-layout epilogue's indices) and one block runs per multiprocessor, too few warps
    // to hide the copies' latency; a bound below what its loop keeps live makes it spill.
    // A limit the user named (maxnreg) replaces the bound: nvcc refuses both on one kernel.
    // Warp roles: one block, each thread at launch as many registers as that allows, which the
    // roles' setmaxnreg share out (specialize_warps.cpp); a second block would starve their
    // setmaxnreg.inc.
    std::string bounds = std::to_string(k.threads);
    int blocks = k.warp_roles ? 1 : min_blocks_per_multiprocessor(k.threads, k.accumulator_registers, k.loop_registers);
    if (blocks > 0) bounds += ", " + std::to_string(blocks);
    const std::string qualifier = k.max_registers > 0 ? "__maxnreg__(" + std::to_string(k.max_registers) + ")"
                                                      : "__launch_bounds__(" + bounds + ")";
    std::string head = "extern \"C\" __global__ void " + qualifier + " " + k.name + "(";
    if (params.empty()) {
      w.open(head + ")");
    } else {
      w.line(head);
      for (size_t i = 0; i + 1 < params.size(); ++i) w.line("    " + params[i] + ",");
      w.open("    " + params.back() + ")");
    }
    for (const std::string& u : unpack) w.line(u);
    if (k.shared.empty()) return;
    // 1024: the base of the wgmma swizzles' arrays (SharedArray::alignment), which sit at
    // multiples of it. Each array at the offset allocate-threadgroup-memory gave it, in address
    // order.
    w.line("extern __shared__ __align__(1024) unsigned char mt_smem[];");
    std::vector<KernelInterface::Shared> arrays = k.shared;
    std::stable_sort(arrays.begin(), arrays.end(), [](const auto& x, const auto& y) { return x.offset < y.offset; });
    for (const KernelInterface::Shared& s : arrays) {
      METILE_ASSERT(s.offset >= 0, "array ", s.name, " reached the emitter unplaced: run allocate-threadgroup-memory first");
      w.line(c.storage(s.dtype) + "* const " + s.name + " = reinterpret_cast<" + c.storage(s.dtype) +
             "*>(mt_smem + " + std::to_string(s.offset) + ");");
    }
  }

  std::string builtin(gpu::Builtin which, int axis) const override {
    static const char* axes[] = {"x", "y", "z"};
    for (const BuiltinSpelling& b : kCudaBuiltins)
      if (which == b.ir) return fill_pattern(b.expr, axes[axis]);
    fail(METILE_ERROR_INTERNAL, "cuda", "unknown builtin ", gpu::builtin_name(which));
  }

  std::string pointer(DType dtype, AddrSpace, bool is_const) const override {
    return std::string(is_const ? "const " : "") + c.storage(dtype) + "*";
  }

  // __syncthreads orders shared and global memory among the block's threads.
  // A barrier that orders device memory also publishes it to other blocks (split_k's tickets).
  std::string barrier(bool device_memory) const override {
    return device_memory ? "__threadfence(); __syncthreads()" : "__syncthreads()";
  }

  std::string group_memory_barrier() const override { return "__syncthreads()"; }

  // bar.sync orders shared and global memory among the threads taking part, as __syncthreads
  // (barrier 0) does among the block's.
  std::string named_barrier(int64_t id, int64_t threads, bool device_memory) const override {
    return std::string(device_memory ? "__threadfence(); " : "") + "asm volatile(\"bar.sync " + std::to_string(id) +
           ", " + std::to_string(threads) + ";\" ::: \"memory\")";
  }

  // sm_90a: every warp of the warpgroup runs it together (.sync.aligned).
  std::string set_max_registers(int64_t count, bool inc) const override {
    return std::string("asm volatile(\"setmaxnreg.") + (inc ? "inc" : "dec") + ".sync.aligned.u32 " +
           std::to_string(count) + ";\")";
  }

  // TMA copies read global memory through the async proxy (PTX ISA, memory consistency model).
  std::string async_proxy_fence() const override {
    return "asm volatile(\"fence.proxy.async.global;\" ::: \"memory\")";
  }

  std::string shuffle(bool xor_mask, DType t, const std::string& x,
                      const std::string& lane) const override {
    std::string fn = xor_mask ? "__shfl_xor_sync" : "__shfl_sync";
    auto call = [&](const std::string& v) { return fn + "(mt_warp_mask(), " + v + ", " + lane + ")"; };
    switch (t) {
      case DType::boolean: return "bool(" + call("int(" + x + ")") + ")";
      case DType::i8: return "((signed char)" + call("int(" + x + ")") + ")";
      case DType::u8: return "((uchar)" + call("int(" + x + ")") + ")";
      default: return call(x);  // float (also f16/bf16 values), int, uint, llong
    }
  }

  std::string simd_reduce(Reduction, DType, const std::string&) const override { return ""; }

  std::string vector_type(DType t, int64_t width) const override {
    return "mt_vec<" + c.storage(t) + ", " + std::to_string(width) + ">";
  }

  std::string vector_pointer(DType t, int64_t width, AddrSpace, bool is_const) const override {
    return std::string(is_const ? "const " : "") + vector_type(t, width) + "*";
  }

  bool vector_loads_in_flight() const override { return true; }

  std::string vector_aligned(const std::string& ptr, int64_t bytes) const override {
    return "(reinterpret_cast<ullong>(" + ptr + ") & " + std::to_string(bytes - 1) + "ull) == 0";
  }

  std::string async_copy(const std::string& dst, const std::string& src, int64_t bytes) const override {
    if (bytes == 16) return "mt_cp_async16(" + dst + ", " + src + ")";
    // 4 and 8 bytes (a kept row's element copies, copy_rows_async.cpp): cp.async.ca, the form
    // for sizes below 16; spelled here so that the prelude every kernel pastes stays as it was.
    if (bytes == 4 || bytes == 8)
      return "asm volatile(\"cp.async.ca.shared.global [%0], [%1], " + std::to_string(bytes) +
             ";\" ::\"r\"(mt_smem_addr(" + dst + ")), \"l\"(" + src + ") : \"memory\")";
    return "";
  }

  std::string async_copy_if(const std::string& dst, const std::string& src, int64_t bytes,
                            const std::string& pred) const override {
    return bytes == 16 ? "mt_cp_async16_if(" + dst + ", " + src + ", " + pred + ")" : "";
  }

  std::string warpgroup_sync() const override { return "mt_wgmma_sync()"; }

  std::string async_sync(int64_t pending) const override {
    if (pending < 0) return "mt_cp_async_commit()";
    return "asm volatile(\"cp.async.wait_group " + std::to_string(pending) + ";\" ::: \"memory\")";
  }

  // mma.sync (PTX "Matrix Fragments for mma.m16n8k8 / m16n8k16"): lane = 4 * g + t. Per k step
  // each warp reads its A fragments (rows g, g + 8 of each 16-row tile) and B fragments
  // (column g of each 8-column tile) from shared memory and issues tiles_m x tiles_n mmas on
  // the accumulator registers, 4 per tile in the order the atom's C layout names them.
  void mma(SourceWriter& w, const MmaSpec& s) const override {
    if (s.atom == AtomKind::wgmma) return emit_cuda_wgmma(w, s);
    const std::string tm = std::to_string(s.tiles_m()), tn = std::to_string(s.tiles_n());
    const std::string lda = std::to_string(s.lda), ldb = std::to_string(s.ldb);
    w.line("const int mma_lane = " + s.tid + " & 31, mma_warp = " + s.tid + " >> 5;");
    w.line("const int mma_g = mma_lane >> 2, mma_t = mma_lane & 3;");
    w.line("const int mma_row = (mma_warp % " + std::to_string(s.warps_m) + ") * " +
           std::to_string(s.m / s.warps_m) + " + mma_g;");
    w.line("const int mma_col = (mma_warp / " + std::to_string(s.warps_m) + ") * " +
           std::to_string(s.n / s.warps_n) + " + mma_g;");
    // ldmatrix: lane l addresses row l % 16, 16 bytes in (l / 16) of a 16-row block: 8 16-bit
    // elements, or 4 f32 ones for tf32, whose 32-bit words land where m16n8k8's A wants them.
    const bool frag16 = s.ldmatrix && !s.tf32, frag32 = s.ldmatrix && s.tf32;
    const std::string esz = s.tf32 ? "4" : "2";  // bytes per staged element
    if (s.ldmatrix) {
      w.line(std::string("const int mma_lr = mma_lane & 15, mma_lh = (mma_lane >> 4) * ") + (s.tf32 ? "4;" : "8;"));
      w.line("const int mma_row0 = mma_row - mma_g, mma_col0 = mma_col - mma_g;");
      // 32-bit shared addresses: the arrays' once, each thread's offset once, then a constant
      // per fragment and k step (an immediate of the ldmatrix).
      w.line("const uint mma_sa = mt_smem_addr(" + s.a + ") + ((mma_row0 + mma_lr) * " + lda + " + mma_lh) * " + esz + ";");
      if (s.b_kmajor)  // B^T, n rows of k: lane l addresses row l % 8 of 8 x 8 block (l / 16, (l / 8) % 2)
        w.line("const uint mma_sb = mt_smem_addr(" + s.b + ") + ((mma_col0 + (mma_lane >> 4) * 8 + (mma_lane & 7)) * " +
               ldb + " + ((mma_lane >> 3) & 1) * 8) * 2;");
      else if (!s.tf32)
        w.line("const uint mma_sb = mt_smem_addr(" + s.b + ") + (mma_lr * " + ldb + " + mma_col0) * " + esz + ";");
    }
    if (s.b_kmajor && !frag16) fail(METILE_ERROR_INTERNAL, "cuda", "k-major B needs 16-bit ldmatrix fragments");
    // tf32x3: fragments hold the f32 bits; mt_split_tf32 turns each n-word fragment into n
    // TF32 high words then n TF32 residual words, which mt_mma_tf32x3 multiplies three times.
    auto word = [&](const std::string& e) { return s.tf32x3 ? "__float_as_uint(" + e + ")" : "mt_tf32(" + e + ")"; };
    // Fragments of k step kk into arrays fa (A) and fb (B).
    auto fragments = [&](const std::string& fa, const std::string& fb, const std::string& kk) {
      if (frag16) {
        // A: matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15) are a0..a3. B (k x n, row-major) through
        // .trans: matrices (k 0-7 | 8-15) of columns j and j + 1 are b0, b1 of j, then of j + 1.
        w.line("#pragma unroll");
        w.line("for (int mma_i = 0; mma_i < " + tm + "; ++mma_i)");
        w.line("  mt_ldmatrix_x4(" + fa + "[mma_i], mma_sa + (16 * mma_i * " + lda + " + " + kk + ") * " + esz + ");");
        w.line("#pragma unroll");
        w.line("for (int mma_j = 0; mma_j + 1 < " + tn + "; mma_j += 2)");
        if (s.b_kmajor) {  // B^T (n x k) without .trans: blocks (n 0-7 | 8-15 of j) x (k 0-7 | 8-15)
          w.line("  mt_ldmatrix_x4(&" + fb + "[mma_j][0], mma_sb + (8 * mma_j * " + ldb + " + " + kk + ") * 2);");
          if (s.tiles_n() % 2 == 1)
            w.line("mt_ldmatrix_x2(" + fb + "[" + std::to_string(s.tiles_n() - 1) + "], mma_sb + (" +
                   std::to_string(8 * (s.tiles_n() - 1)) + " * " + ldb + " + " + kk + ") * 2);");
        } else {
          w.line("  mt_ldmatrix_x4_trans(&" + fb + "[mma_j][0], mma_sb + (" + kk + " * " + ldb +
                 " + 8 * mma_j + mma_lh) * " + esz + ");");
          if (s.tiles_n() % 2 == 1)
            w.line("mt_ldmatrix_x2_trans(" + fb + "[" + std::to_string(s.tiles_n() - 1) + "], mma_sb + (" + kk +
                   " * " + ldb + " + " + std::to_string(8 * (s.tiles_n() - 1)) + ") * " + esz + ");");
        }
      } else {
        w.line("#pragma unroll");
        w.open("for (int mma_i = 0; mma_i < " + tm + "; ++mma_i)");
        if (frag32) {  // matrices (rows 0-7 | 8-15) x (k 0-3 | 4-7) are a0..a3, rounded to tf32
          w.line("mt_ldmatrix_x4(" + fa + "[mma_i], mma_sa + (16 * mma_i * " + lda + " + " + kk + ") * " + esz + ");");
          w.line("#pragma unroll");
          if (s.tf32x3)
            w.line("mt_split_tf32<4>(" + fa + "[mma_i]);");
          else
            w.line("for (int mma_r = 0; mma_r < 4; ++mma_r) " + fa + "[mma_i][mma_r] = mt_tf32(__uint_as_float(" + fa + "[mma_i][mma_r]));");
        } else if (s.tf32) {
          w.line("const float* mma_p = " + s.a + " + (mma_row + 16 * mma_i) * " + lda + " + " + kk + " + mma_t;");
          w.line(fa + "[mma_i][0] = " + word("mma_p[0]") + ";");
          w.line(fa + "[mma_i][1] = " + word("mma_p[8 * " + lda + "]") + ";");
          w.line(fa + "[mma_i][2] = " + word("mma_p[4]") + ";");
          w.line(fa + "[mma_i][3] = " + word("mma_p[8 * " + lda + " + 4]") + ";");
          if (s.tf32x3) w.line("mt_split_tf32<4>(" + fa + "[mma_i]);");
        } else {
          w.line("const ushort* mma_p = " + s.a + " + (mma_row + 16 * mma_i) * " + lda + " + " + kk + " + 2 * mma_t;");
          w.line(fa + "[mma_i][0] = mt_pair(mma_p);");
          w.line(fa + "[mma_i][1] = mt_pair(mma_p + 8 * " + lda + ");");
          w.line(fa + "[mma_i][2] = mt_pair(mma_p + 8);");
          w.line(fa + "[mma_i][3] = mt_pair(mma_p + 8 * " + lda + " + 8);");
        }
        w.close();
        // B (k x n): .trans moves 16-bit halves, so 32-bit elements are read one by one (k = t,
        // t + 4 of column g); the bank groups of 4 rows apart differ by the row padding.
        w.line("#pragma unroll");
        w.open("for (int mma_j = 0; mma_j < " + tn + "; ++mma_j)");
        if (s.tf32) {
          w.line("const float* mma_q = " + s.b + " + (" + kk + " + mma_t) * " + ldb + " + mma_col + 8 * mma_j;");
          w.line(fb + "[mma_j][0] = " + word("mma_q[0]") + ";");
          w.line(fb + "[mma_j][1] = " + word("mma_q[4 * " + ldb + "]") + ";");
          if (s.tf32x3) w.line("mt_split_tf32<2>(" + fb + "[mma_j]);");
        } else {  // rows k = 2t, 2t + 1 (+ 8) of column g, two 16-bit reads per register
          w.line("const ushort* mma_q = " + s.b + " + (" + kk + " + 2 * mma_t) * " + ldb + " + mma_col + 8 * mma_j;");
          w.line(fb + "[mma_j][0] = mt_pack(mma_q[0], mma_q[" + ldb + "]);");
          w.line(fb + "[mma_j][1] = mt_pack(mma_q[8 * " + ldb + "], mma_q[9 * " + ldb + "]);");
        }
        w.close();
      }
    };
    const std::string fn = s.tf32x3 ? "mt_mma_tf32x3" : s.tf32 ? "mt_mma_tf32" : s.ab == DType::bf16 ? "mt_mma_bf16" : "mt_mma_f16";
    const std::string wa = s.tf32x3 ? "8" : "4", wb = s.tf32x3 ? "4" : "2";  // words per fragment
    // tiles_m x tiles_n mmas; serpentine: odd rows of atoms walk the columns backwards, so each
    // row starts on the B fragment the previous one ended with.
    auto mmas = [&](const std::string& fa, const std::string& fb) {
      std::string j = s.serpentine ? "mma_jj" : "mma_j";
      w.line("#pragma unroll");
      w.open("for (int mma_i = 0; mma_i < " + tm + "; ++mma_i)");
      w.line("#pragma unroll");
      w.open("for (int mma_j = 0; mma_j < " + tn + "; ++mma_j)");
      if (s.serpentine) w.line("const int mma_jj = (mma_i & 1) ? " + tn + " - 1 - mma_j : mma_j;");
      w.line(fn + "(&" + s.acc + "[4 * (mma_i + " + tm + " * " + j + ")], " + fa + "[mma_i], " + fb + "[" + j + "]);");
      w.close();
      w.close();
    };
    const std::string ak = std::to_string(s.atom_k), kc = std::to_string(s.k);
    if (s.preload && s.k > s.atom_k) {
      // Two fragment buffers: step k's mmas run while step k + 1's fragments are read.
      w.line("uint mma_a[2][" + tm + "][" + wa + "], mma_b[2][" + tn + "][" + wb + "];");
      fragments("mma_a[0]", "mma_b[0]", "0");
      w.line("#pragma unroll");
      w.open("for (int mma_k = 0; mma_k < " + kc + "; mma_k += " + ak + ")");
      w.line("const int mma_s = (mma_k / " + ak + ") & 1;");
      w.open("if (mma_k + " + ak + " < " + kc + ")");
      fragments("mma_a[mma_s ^ 1]", "mma_b[mma_s ^ 1]", "(mma_k + " + ak + ")");
      w.close();
      mmas("mma_a[mma_s]", "mma_b[mma_s]");
      w.close();
    } else {
      w.line("#pragma unroll");
      w.open("for (int mma_k = 0; mma_k < " + kc + "; mma_k += " + ak + ")");
      w.line("uint mma_a[" + tm + "][" + wa + "], mma_b[" + tn + "][" + wb + "];");
      fragments("mma_a", "mma_b", "mma_k");
      mmas("mma_a", "mma_b");
      w.close();
    }
  }

  void tma(SourceWriter& w, const gpu::Op& op, const std::vector<std::string>& operands, DType element,
           const std::string& result) const override {
    emit_cuda_tma(w, op, operands, element, result);
  }
};

}  // namespace

CudaKernelSource emit_cuda(const gpu::Function& f) {
  CudaDialect dialect;
  KernelInterface k;
  CudaKernelSource out;
  out.source = emit_gpu_kernel(f, dialect, &k);
  out.entry = k.name;
  out.threads_per_group = k.threads;
  out.dynamic_shared_bytes = gpu::threadgroup_bytes(f);
  for (const std::string& m : k.tensor_maps) out.tensor_maps += m + "\n";
  return out;
}

}  // namespace metile
