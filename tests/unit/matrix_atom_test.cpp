// The matrix atom table (src/target/matrix_atoms.def): its rows are consistent, its kind names
// are what mma ops carry, and every atom a target lists is one a suite GEMM takes there.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "kernels/kernels.h"
#include "passes/pipeline.h"
#include "passes/tile/tile_pipeline.h"
#include "support/error.h"
#include "target/gpu_target.h"

namespace metile {
namespace METILE_UNITY_ID {

TEST(MatrixAtoms, EachRowIsAValidInstructionShape) {
  std::set<std::tuple<AtomKind, int, int, int, DType>> seen;
  for (size_t i = 0; i < matrix_atom_table().size(); ++i) {
    const MatrixAtom& a = matrix_atom_table()[i];
    SCOPED_TRACE(cat(atom_kind_name(a.kind), " ", a.m, "x", a.n, "x", a.k, " ", dtype_name(a.ab)));
    EXPECT_EQ(static_cast<size_t>(a.id), i);  // matrix_atom(id) is row id
    EXPECT_TRUE(seen.insert({a.kind, a.m, a.n, a.k, a.ab}).second) << "a second row for one instruction";
    EXPECT_GT(a.k, 0);
    EXPECT_TRUE(is_float(a.ab));
    EXPECT_EQ(a.acc, DType::f32);
    EXPECT_TRUE(a.b_major == kBNMajor || a.b_major == kBKMajor || a.b_major == (kBNMajor | kBKMajor));
    EXPECT_TRUE(!a.relaxed || a.ab == DType::f32);  // TF32 rounds f32 operands only
    EXPECT_TRUE(!a.splits || a.relaxed);
    // The c fragment covers one warp's rows of the m x n result, one element per (lane, value).
    const int warps = atom_kind_threads(a.kind) / 32;
    ASSERT_EQ(a.m % warps, 0);
    EXPECT_EQ(a.c.mode(0).size(), 32);
    EXPECT_EQ(a.c.size(), a.m / warps * a.n);
    EXPECT_EQ(a.c.cosize(), a.m / warps * a.n);
  }
}

TEST(MatrixAtoms, MmaOpsNameTheirKind) {
  std::set<std::string_view> names;
  for (AtomKind kind : {AtomKind::mma_sync, AtomKind::wgmma, AtomKind::simdgroup_matrix, AtomKind::tensor_ops}) {
    gpu::Op op;
    op.kind = gpu::GpuOpKind::MMA;
    op.attrs = {{"atom", std::string(atom_kind_name(kind))}};
    EXPECT_EQ(mma_atom_kind(op), kind);
    names.insert(atom_kind_name(kind));
  }
  EXPECT_EQ(names.size(), 4u);
  gpu::Op op;
  op.kind = gpu::GpuOpKind::MMA;
  op.attrs = {{"atom", std::string("mma")}};
  try {
    mma_atom_kind(op);
    FAIL() << "an unknown atom kind was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    EXPECT_NE(std::string(e.what()).find("atom=\"mma\""), std::string::npos) << e.what();
  }
}

// Each atom a target lists, and a suite case whose dot takes it there (the layouts stage names
// the chosen atom as "(kind mxnxk dtype"). A target listing an atom no case reaches fails.
TEST(MatrixAtoms, TargetsListTheAtomsTheirGemmsTake) {
  struct Use {
    Atom atom;
    const char* kcase;
  };
  struct Row {
    GpuTarget target;
    std::vector<Use> uses;
  };
  const std::vector<Row> rows = {
      {apple_gpu_target(), {{Atom::simdgroup_8x8x8_f32, "gemm/64x64x64"}, {Atom::simdgroup_8x8x8_f16, "gemm_f16/64x64x64"}}},
      {apple_gpu_target(10, true),
       {{Atom::tensor_ops_8x8x8_f32, "gemm_tf32/64x64x64"}, {Atom::tensor_ops_8x8x8_f16, "gemm_f16/64x64x64"},
        {Atom::tensor_ops_8x8x8_bf16, "gemm_bf16/64x96x32"}, {Atom::simdgroup_8x8x8_f32, "gemm_big/128x128x64"},
        {Atom::simdgroup_8x8x8_f16, "gemm_f16_wgbig/256x128x64"}}},
      {nvidia_gpu_target("sm_80"),
       {{Atom::mma_m16n8k8_tf32, "gemm_tf32x3/64x64x64"}, {Atom::mma_m16n8k16_f16, "gemm_f16/64x64x64"},
        {Atom::mma_m16n8k16_bf16, "gemm_bf16/64x96x32"}}},
      {nvidia_gpu_target("sm_90"),
       {{Atom::mma_m16n8k8_tf32, "gemm_tf32x3/64x64x64"}, {Atom::mma_m16n8k16_f16, "gemm_f16/64x64x64"},
        {Atom::mma_m16n8k16_bf16, "gemm_bf16/64x96x32"}, {Atom::wgmma_m64n8k16_f16, "gemm_f16_wg/128x128x96"},
        {Atom::wgmma_m64n8k16_bf16, "gemm_bf16_wg_bias_gelu/128x64x64"},
        {Atom::wgmma_m64n8k8_tf32, "gemm_tf32_wg/128x128x96"},
        {Atom::wgmma_m64n8k32_e4m3, "fp8:e4m3"}, {Atom::wgmma_m64n8k32_e5m2, "fp8:e5m2"}}},
  };
  for (const Row& row : rows) {
    std::set<Atom> used;
    for (const Use& u : row.uses) {
      const MatrixAtom& a = matrix_atom(u.atom);
      SCOPED_TRACE(cat(row.target.name, " ", u.kcase));
      kernels::Case c;
      if (std::string(u.kcase).rfind("fp8:", 0) == 0) {  // not a suite case: B given N x K
        kernels::GemmConfig g = kernels::gemm_config(a.ab, 64, 64, 64);
        g.trans_b = true;
        c.program = kernels::gemm(g);
      } else {
        c = kernels::make_case(u.kcase);
      }
      CompileOptions o;
      o.allow_tf32 = c.allow_tf32;
      o.dot_precision = c.dot_precision;
      const bool cuda = row.target.dialect == "cuda";
      const std::string layouts =
          run_gpu_pipeline(*run_tile_pipeline(c.program, o, false, false, cuda).program, row.target, o, "test").layouts;
      const std::string want = cat("(", atom_kind_name(a.kind), " ", a.m, "x", a.n, "x", a.k, " ", dtype_name(a.ab), ",");
      EXPECT_NE(layouts.find(want), std::string::npos) << want << "\n" << layouts;
      used.insert(u.atom);
    }
    std::set<Atom> listed(row.target.matrix_atoms.begin(), row.target.matrix_atoms.end());
    listed.insert(row.target.warpgroup_atoms.begin(), row.target.warpgroup_atoms.end());
    EXPECT_EQ(listed, used) << row.target.name << " lists an atom no case above takes";
  }
}

}  // namespace
}  // namespace metile
