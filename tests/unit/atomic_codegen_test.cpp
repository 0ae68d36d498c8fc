// Atomics through the GPU pipeline, every op x dtype: CUDA C++ compiles with NVRTC for sm_90
// (as CI does, without a GPU); MSL has the ops Metal has and rejects the others with
// METILE_ERROR_UNSUPPORTED naming the op and the dtype. Results on devices: the shared kernel
// suite (histogram, atomic_sum) and bindings/python/tests/test_atomics.py.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

#include "codegen/metal/msl.h"
#include "kernels/dsl.h"
#include "passes/pipeline.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_device.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::V;

// Old[i] = op(X + i, X[i]) for i < N (a tile atomic), then Old[64] = op(X + 0, X[0]) (a scalar one).
Program atomic_program(OpKind op, DType d) {
  KernelBuilder k(std::string(op_name(op)) + "_" + dtype_name(d));
  V x = k.ptr("X", d), old = k.ptr("Old", d);
  V n = k.scalar("N");
  V offs = k.arange(0, 64);
  V mask = offs < n;
  V v = k.load(x + offs, mask);
  V r = op == OpKind::ATOMIC_CAS ? k.atomic_cas(x + offs, v, v, mask) : k.atomic(op, x + offs, v, mask);
  k.store(old + offs, r, mask);
  V first = k.load(x + k.i32(0));
  V s = op == OpKind::ATOMIC_CAS ? k.atomic_cas(x + k.i32(0), first, first, k.i32(1) < n)
                                 : k.atomic(op, x + k.i32(0), first);
  k.store(old + k.i32(64), s);
  return k.finish();
}

const OpKind kOps[] = {OpKind::ATOMIC_ADD, OpKind::ATOMIC_MAX, OpKind::ATOMIC_MIN,
                       OpKind::ATOMIC_XCHG, OpKind::ATOMIC_CAS};
const DType kTypes[] = {DType::i32, DType::u32, DType::i64, DType::f32};

TEST(AtomicCodegen, CudaCompilesEveryOpAndType) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  for (OpKind op : kOps) {
    for (DType d : kTypes) {
      SCOPED_TRACE(std::string(op_name(op)) + " " + dtype_name(d));
      Artifact a = cuda_build_program(atomic_program(op, d), CompileOptions{}, "sm_90");
      ASSERT_GT(a.bytes.size(), 4u);
      EXPECT_EQ(std::memcmp(a.bytes.data(), "\x7f" "ELF", 4), 0);
      const std::string& src = a.sources.at(Stage::cuda);
      EXPECT_NE(src.find("mt_" + std::string(op_name(op)) + "(&"), std::string::npos) << src;
    }
  }
}

TEST(AtomicCodegen, MslHasWhatMetalHasAndNamesTheRest) {
  for (OpKind op : kOps) {
    for (DType d : kTypes) {
      SCOPED_TRACE(std::string(op_name(op)) + " " + dtype_name(d));
      bool metal_has = d == DType::i32 || d == DType::u32 || (d == DType::f32 && op == OpKind::ATOMIC_ADD);
      auto emit = [&] {
        return emit_msl(run_gpu_pipeline(atomic_program(op, d), apple_gpu_target(), CompileOptions{},
                                         "metal-sim")
                            .function);
      };
      if (metal_has) {
        std::string src = emit().source;
        EXPECT_NE(src.find("mt_" + std::string(op_name(op)) + "(&"), std::string::npos) << src;
        continue;
      }
      try {
        emit();
        ADD_FAILURE() << "expected METILE_ERROR_UNSUPPORTED";
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), METILE_ERROR_UNSUPPORTED);
        std::string want = std::string(op_name(op)) + ": no atomic on " + dtype_name(d) + " in msl";
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace metile
