// Errors on the interp device: device errors for undefined behaviour (out-of-bounds access,
// division by zero, bad shifts and casts, ...) naming the op, its source line and the program;
// device limits; and bad launch arguments through the C API, each naming the parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "frontend/builder.h"
#include "kernels/dsl.h"
#include "kernels/launch.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::Launch;
using kernels::V;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Out[offs] = X[offs] for offs = pid * 256 + arange(256), without a mask: the last program of a
// ragged launch reads past X.
Program unmasked_copy(bool oob_store) {
  Builder b("copy");
  ValueId x = b.param("X", Type::ptr(DType::f32));
  ValueId out = b.param("Out", Type::ptr(DType::f32));
  ValueId offs =
      b.binary(OpKind::ADD,
               b.binary(OpKind::MUL, b.grid(OpKind::PROGRAM_ID, 0), b.const_int(DType::i32, 256)),
               b.arange(kNoValue, 256));
  ValueId in = oob_store ? b.binary(OpKind::BITAND, offs, b.const_int(DType::i32, 511)) : offs;
  b.set_loc("oob.py", 12);
  ValueId v = b.load(b.binary(OpKind::ADD, x, in), kNoValue, kNoValue);
  b.set_loc("oob.py", 13);
  b.store(b.binary(OpKind::ADD, out, offs), v, kNoValue);
  return b.finish();
}

TEST(InterpErrors, OutOfBoundsLoadNamesOpLineBufferAndProgram) {
  std::vector<float> x(1000), out(1024);
  Launch l(unmasked_copy(false));
  l.buffer(x).buffer(out);
  EXPECT_EQ(l.run({4, 1, 1}), METILE_ERROR_DEVICE);
  EXPECT_EQ(l.error(),
            "[interp] oob.py:12: load: access of element 1000 outside buffer `X` (1000 elements) "
            "in program (3,0,0)");
}

TEST(InterpErrors, OutOfBoundsStoreAndArgumentOffsets) {
  std::vector<float> x(512), out(1000);
  Launch l(unmasked_copy(true));
  l.buffer(x).buffer(out, 40);  // the buffer starts 10 elements in: 990 remain
  EXPECT_EQ(l.run({4, 1, 1}), METILE_ERROR_DEVICE);
  EXPECT_TRUE(has(l.error(),
                  "oob.py:13: store: access of element 990 outside buffer `Out` (990 elements) in "
                  "program (3,0,0)"))
      << l.error();
}

TEST(InterpErrors, OutOfBoundsTileAndSharedAccess) {
  {
    KernelBuilder k("tile_oob");
    V m = k.ptr("M");
    k.raw().set_loc("t.py", 5);
    // Bounds larger than the buffer (without bounds the matrix is the buffer's: no fault).
    V t = k.wrap(k.raw().tile_load(m.id, k.i32(3).id, k.i32(0).id, k.i32(4).id, Shape::of(2, 2),
                                   k.i32(8).id, k.i32(4).id));
    k.store(m, k.sum(t));
    std::vector<float> mv(16);
    Launch l(k.finish());
    l.buffer(mv);
    EXPECT_EQ(l.run(), METILE_ERROR_DEVICE);
    EXPECT_TRUE(
        has(l.error(), "t.py:5: tile_load: access of element 16 outside buffer `M` (16 elements)"))
        << l.error();
  }
  {
    KernelBuilder k("shared_oob");
    V out = k.ptr("Out");
    V s = k.shared(8);
    V idx = k.arange(0, 16);
    k.raw().set_loc("s.py", 7);
    k.raw().store(k.raw().ptr_offset(s.id, idx.id), k.raw().cast(idx.id, DType::f32), kNoValue);
    k.store(out, k.load(s));
    std::vector<float> o(1);
    Launch l(k.finish());
    l.buffer(o);
    EXPECT_EQ(l.run(), METILE_ERROR_DEVICE);
    EXPECT_TRUE(
        has(l.error(), "s.py:7: store: access of element 8 outside shared memory #0 (8 elements)"))
        << l.error();
  }
}

// A one-op kernel: Out[0] = op(A, B) on scalar parameters of dtype d.
std::string scalar_fault(OpKind op, DType d, int64_t a, int64_t b) {
  Builder bl("fault");
  ValueId out = bl.param("Out", Type::ptr(d));
  ValueId pa = bl.param("A", Type::scalar(d));
  ValueId pb = bl.param("B", Type::scalar(d));
  bl.set_loc("ub.py", 21);
  bl.store(out, bl.binary(op, pa, pb), kNoValue);
  std::vector<int64_t> o(1);
  Launch l(bl.finish());
  l.buffer(o)
      .scalar(d == DType::i64 ? METILE_ARG_I64 : METILE_ARG_I32, a)
      .scalar(d == DType::i64 ? METILE_ARG_I64 : METILE_ARG_I32, b);
  EXPECT_EQ(l.run(), METILE_ERROR_DEVICE);
  return l.error();
}

TEST(InterpErrors, UndefinedIntegerArithmeticIsReported) {
  EXPECT_EQ(scalar_fault(OpKind::DIV, DType::i32, 5, 0),
            "[interp] ub.py:21: div: integer div by zero (5 / 0) in program (0,0,0)");
  EXPECT_TRUE(
      has(scalar_fault(OpKind::MOD, DType::i32, 5, 0), "ub.py:21: mod: integer mod by zero"));
  EXPECT_TRUE(has(scalar_fault(OpKind::FLOORDIV, DType::i64, -5, 0),
                  "ub.py:21: floordiv: integer floordiv by zero"));
  EXPECT_TRUE(has(scalar_fault(OpKind::SHL, DType::i32, 1, 32),
                  "shl: shift count 32 is outside [0, 32) for i32"));
  EXPECT_TRUE(has(scalar_fault(OpKind::SHR, DType::i64, 1, -1),
                  "shr: shift count -1 is outside [0, 64) for i64"));
}

TEST(InterpErrors, LoopStepZeroIsReported) {
  Builder b("loop0");
  ValueId step = b.param("S", Type::scalar(DType::i32));
  b.set_loc("loop.py", 4);
  b.for_begin(b.const_int(DType::i32, 0), b.const_int(DType::i32, 10), step, {});
  b.for_end({});
  Launch l(b.finish());
  l.i32(0);
  EXPECT_EQ(l.run(), METILE_ERROR_DEVICE);
  EXPECT_EQ(l.error(), "[interp] loop.py:4: for: step is 0 in program (0,0,0)");
}

TEST(InterpErrors, TheFirstFailingProgramInGridOrderIsReported) {
  // Programs with (x + 8y + 1) % 3 == 0 divide by zero; (2,0,0) comes first in grid order (x
  // fastest), whichever thread gets there first.
  KernelBuilder k("first_failure");
  V out = k.ptr("Out", DType::i32);
  V pid = k.program_id(0) + k.program_id(1) * 8;
  k.store(out + pid, k.binary(OpKind::DIV, k.i32(100), (pid + 1) % 3));
  const Program p = k.finish();
  for (int rep = 0; rep < 10; ++rep) {
    std::vector<int32_t> o(64);
    Launch l(p);
    l.buffer(o);
    EXPECT_EQ(l.run({8, 8, 1}), METILE_ERROR_DEVICE);
    EXPECT_TRUE(has(l.error(), "in program (2,0,0)")) << l.error();
  }
}

TEST(InterpErrors, DeviceLimitsAreUnsupported) {
  {
    KernelBuilder k("too_much_shared");
    V out = k.ptr("Out");
    V a = k.shared(8192), b = k.shared(8192);  // 32 KiB each: 64 KiB fits exactly
    k.raw().set_loc("big.py", 3);
    V c = k.wrap(k.raw().shared(1, DType::f32));
    k.store(out, k.load(a) + k.load(b) + k.load(c));
    std::vector<float> o(1);
    Launch l(k.finish());
    l.buffer(o);
    EXPECT_EQ(l.run(), METILE_ERROR_UNSUPPORTED);
    EXPECT_TRUE(has(l.error(),
                    "[interp] big.py:3: shared: kernel too_much_shared needs more than the interp "
                    "device's 65536 bytes"))
        << l.error();
  }
  {
    KernelBuilder k("too_many_threads");
    k.raw().set_num_threads(2048);
    V out = k.ptr("Out", DType::i32);
    k.store(out + k.thread_id(), k.thread_id());
    std::vector<int32_t> o(2048);
    Launch l(k.finish());
    l.buffer(o);
    EXPECT_EQ(l.run(), METILE_ERROR_UNSUPPORTED);
    EXPECT_TRUE(has(l.error(), "uses 2048 threads; the interp device runs at most 1024"))
        << l.error();
  }
}

// ---- Bad launch arguments through the C API ----

class BadLaunch : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(metile_device_open(&dev_, "interp"), METILE_OK);
    Builder b("scale");
    ValueId x = b.param("X", Type::ptr(DType::f32));
    ValueId n = b.param("N", Type::scalar(DType::i32));
    ValueId f = b.param("F", Type::scalar(DType::f32));
    ValueId offs = b.arange(kNoValue, 4);
    ValueId p = b.binary(OpKind::ADD, x, offs);
    b.store(p, b.binary(OpKind::MUL, b.load(p, b.binary(OpKind::LT, offs, n), kNoValue), f),
            b.binary(OpKind::LT, offs, n));
    ASSERT_EQ(metile_program_parse(&prog_, print(b.finish()).c_str()), METILE_OK);
    ASSERT_EQ(metile_kernel_compile(&kernel_, dev_, prog_, nullptr), METILE_OK)
        << metile_last_error();
    ASSERT_EQ(metile_buffer_alloc(&buf_, dev_, 16), METILE_OK);
    args_[0].kind = METILE_ARG_BUFFER;
    args_[0].buffer = buf_;
    args_[1].kind = METILE_ARG_I32;
    args_[1].i = 4;
    args_[2].kind = METILE_ARG_F32;
    args_[2].f = 2.0;
  }
  void TearDown() override {
    metile_buffer_release(buf_);
    metile_kernel_release(kernel_);
    metile_program_release(prog_);
    metile_device_release(dev_);
  }
  // Launches with the current args; expects INVALID_ARGUMENT and returns the message.
  std::string bad(size_t n = 3, std::array<uint32_t, 3> grid = {1, 1, 1}) {
    const uint32_t g[3] = {grid[0], grid[1], grid[2]};
    EXPECT_EQ(metile_kernel_launch(kernel_, g, args_, n), METILE_ERROR_INVALID_ARGUMENT);
    std::string launch_error = metile_last_error();
    // A prepared launch checks the same way.
    metile_launch* l = nullptr;
    EXPECT_EQ(metile_launch_create(&l, kernel_, g, args_, n), METILE_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(metile_last_error()), launch_error);
    return launch_error;
  }

  metile_device* dev_ = nullptr;
  metile_program* prog_ = nullptr;
  metile_kernel* kernel_ = nullptr;
  metile_buffer* buf_ = nullptr;
  metile_arg args_[3] = {};
};

TEST_F(BadLaunch, GoodArgumentsRun) {
  const uint32_t g[3] = {1, 1, 1};
  EXPECT_EQ(metile_kernel_launch(kernel_, g, args_, 3), METILE_OK) << metile_last_error();
}

TEST_F(BadLaunch, WrongCount) { EXPECT_EQ(bad(2), "[launch] scale takes 3 arguments, got 2"); }

TEST_F(BadLaunch, BufferForScalar) {
  args_[1].kind = METILE_ARG_BUFFER;
  args_[1].buffer = buf_;
  EXPECT_EQ(bad(), "[launch] argument `N` (i32): got a buffer argument");
}

TEST_F(BadLaunch, ScalarForBuffer) {
  args_[0].kind = METILE_ARG_I32;
  EXPECT_EQ(bad(), "[launch] argument `X` (ptr<f32>) needs a buffer, got i32");
}

TEST_F(BadLaunch, FloatForIntegerParameter) {
  args_[1].kind = METILE_ARG_F64;
  args_[1].f = 4.0;
  EXPECT_EQ(bad(), "[launch] argument `N` (i32): got a float for an integer parameter");
}

TEST_F(BadLaunch, IntegerOutOfRange) {
  args_[1].kind = METILE_ARG_I64;
  args_[1].i = int64_t{1} << 40;
  EXPECT_EQ(bad(), "[launch] argument `N` (i32): value 1099511627776 is out of range");
}

TEST_F(BadLaunch, MisalignedOrPastTheEndOffset) {
  args_[0].offset = 2;
  EXPECT_TRUE(
      has(bad(), "argument `X`: offset 2 is past the buffer's 16 bytes or not a multiple of 4"));
  args_[0].offset = 20;
  EXPECT_TRUE(has(bad(), "argument `X`: offset 20 is past the buffer's 16 bytes"));
}

TEST_F(BadLaunch, GridWithZero) {
  EXPECT_EQ(bad(3, {1, 0, 1}), "[launch] grid[1] is 0 (each dimension must be >= 1)");
}

TEST_F(BadLaunch, NullOrReleasedBuffer) {
  args_[0].buffer = nullptr;
  EXPECT_EQ(bad(), "[launch] argument `X` (ptr<f32>): the buffer is NULL");
  metile_buffer* gone = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&gone, dev_, 16), METILE_OK);
  ASSERT_EQ(metile_buffer_release(gone), METILE_OK);
  args_[0].buffer = gone;
  std::string e = bad();
  EXPECT_TRUE(has(e, "[launch] argument `X` (ptr<f32>): ") && has(e, "is not a live metile_buffer"))
      << e;
}

}  // namespace
}  // namespace metile
