// Silent wrong results and crashes found by probing (issue 12, items 3 and 4), checked on every
// device that runs kernels here (interp, cpu, metal-sim) through the C API: mixed-width integer
// promotion, grid overflow, zero loop steps, out-of-range constants, long element-wise chains
// and tiles of 2^24 elements.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "capi_util.h"

namespace METILE_UNITY_ID {

using namespace metile_capi_test;

// Every device here, plus cuda where a GPU is present (the GPU machine's runs).
const std::vector<const char*>& devices() {
  static const std::vector<const char*> list = [] {
    std::vector<const char*> l = {"interp", "cpu", "metal-sim"};
    metile_device* d = nullptr;
    if (metile_device_open(&d, "cuda") == METILE_OK) {
      metile_device_release(d);
      l.push_back("cuda");
    }
    return l;
  }();
  return list;
}

// A device with one kernel compiled from `p`, and helpers to run it over f32 buffers.
struct DeviceRun {
  metile_device* dev = nullptr;
  metile_kernel* k = nullptr;
  std::vector<metile_buffer*> bufs;

  DeviceRun(const char* device, metile_program* p) {
    EXPECT_EQ(metile_device_open(&dev, device), METILE_OK) << metile_last_error();
    if (dev && p) {
      EXPECT_EQ(metile_kernel_compile(&k, dev, p, nullptr), METILE_OK) << device << ": " << metile_last_error();
    }
  }
  ~DeviceRun() {
    for (metile_buffer* b : bufs) metile_buffer_release(b);
    if (k) metile_kernel_release(k);
    if (dev) metile_device_release(dev);
  }
  metile_arg buffer(size_t floats) {
    metile_buffer* b = nullptr;
    EXPECT_EQ(metile_buffer_alloc(&b, dev, floats * sizeof(float)), METILE_OK);
    bufs.push_back(b);
    metile_arg a{};
    a.kind = METILE_ARG_BUFFER;
    a.buffer = b;
    return a;
  }
  static float* data(const metile_arg& a) {
    void* p = nullptr;
    EXPECT_EQ(metile_buffer_contents(a.buffer, &p), METILE_OK);
    return static_cast<float*>(p);
  }
  metile_status launch(std::vector<metile_arg> args, uint32_t g0 = 1, uint32_t g1 = 1, uint32_t g2 = 1) {
    const uint32_t grid[3] = {g0, g1, g2};
    metile_status st = metile_kernel_launch(k, grid, args.data(), args.size());
    if (st == METILE_OK) st = metile_device_synchronize(dev);
    return st;
  }
};

metile_arg i64_arg(int64_t v) {
  metile_arg a{};
  a.kind = METILE_ARG_I64;
  a.i = v;
  return a;
}
metile_arg i32_arg(int64_t v) {
  metile_arg a{};
  a.kind = METILE_ARG_I32;
  a.i = v;
  return a;
}

metile_program* parse(const std::string& text) {
  metile_program* p = nullptr;
  EXPECT_EQ(metile_program_parse(&p, text.c_str()), METILE_OK) << metile_last_error();
  return p;
}

// Out[o] = o + 1 for o < N, o = arange(0, 256); N is an i64 parameter.
metile_program* build_masked_i64_bound() {
  metile_builder* b = nullptr;
  metile_program* p = nullptr;
  metile_type f32p = pointer(METILE_DTYPE_F32), i64 = scalar(METILE_DTYPE_I64);
  metile_value out, n, o, mask, of, one, val, ptr;
  EXPECT_EQ(metile_builder_create(&b, "bound"), METILE_OK);
  EXPECT_EQ(metile_builder_param(b, "Out", &f32p, &out), METILE_OK);
  EXPECT_EQ(metile_builder_param(b, "N", &i64, &n), METILE_OK);
  EXPECT_EQ(metile_builder_arange(b, 0, 256, &o), METILE_OK);
  EXPECT_EQ(metile_builder_binary(b, METILE_OP_LT, o, n, &mask), METILE_OK);
  EXPECT_EQ(metile_builder_cast(b, o, METILE_DTYPE_F32, &of), METILE_OK);
  EXPECT_EQ(metile_builder_const_float(b, METILE_DTYPE_F32, 1.0, &one), METILE_OK);
  EXPECT_EQ(metile_builder_binary(b, METILE_OP_ADD, of, one, &val), METILE_OK);
  EXPECT_EQ(metile_builder_ptr_offset(b, out, o, &ptr), METILE_OK);
  EXPECT_EQ(metile_builder_store(b, ptr, val, mask), METILE_OK);
  EXPECT_EQ(metile_builder_finish(b, &p), METILE_OK) << metile_last_error();
  metile_builder_release(b);
  return p;
}

TEST(Robust, I64BoundComparesInI64OnEveryDevice) {
  metile_program* p = build_masked_i64_bound();
  ASSERT_NE(p, nullptr);
  // numpy: an i64 scalar meeting an i32 array compares in i64, so 2^31 and 2^32 + 5 are above
  // every offset (narrowing gave 0 and 5 elements).
  const int64_t bounds[] = {5, 256, 1000, int64_t{1} << 31, (int64_t{1} << 32) + 5, -1};
  for (const char* device : devices()) {
    DeviceRun r(device, p);
    ASSERT_NE(r.k, nullptr);
    for (int64_t n : bounds) {
      metile_arg out = r.buffer(256);
      ASSERT_EQ(r.launch({out, i64_arg(n)}), METILE_OK) << device << ": " << metile_last_error();
      int64_t want = n < 0 ? 0 : n > 256 ? 256 : n, written = 0;
      for (int i = 0; i < 256; ++i) {
        float v = DeviceRun::data(out)[i];
        if (v != 0) {
          ++written;
          EXPECT_EQ(v, i + 1.0f) << device << " N=" << n << " i=" << i;
        }
      }
      EXPECT_EQ(written, want) << device << " N=" << n;
    }
  }
  metile_program_release(p);
}

// Float -> integer casts truncate toward zero and saturate at the type's range, NaN giving 0,
// on every device (interp included: it used to report them as undefined).
TEST(Robust, FloatToIntegerCastsSaturateOnEveryDevice) {
  const float in[8] = {NAN, 3e9f, -3e9f, 256.0f, -1.5f, 2.9f, INFINITY, -INFINITY};
  struct Case {
    const char* dtype;
    int64_t want[8];
  };
  const Case cases[] = {
      {"i32", {0, 2147483647, -2147483648LL, 256, -1, 2, 2147483647, -2147483648LL}},
      {"u32", {0, 3000000000LL, 0, 256, 0, 2, 4294967295LL, 0}},
      {"i8", {0, 127, -128, 127, -1, 2, 127, -128}},
      {"u8", {0, 255, 0, 255, 0, 2, 255, 0}},
  };
  for (const Case& c : cases) {
    const std::string d = c.dtype;
    metile_program* p = parse(
        "kernel @sat(%X: ptr<f32>, %Out: ptr<i64>) {\n"
        "  %z = const {value = 0} : i32\n"
        "  %o = arange %z {size = 8} : tile<8xi32>\n"
        "  %px = ptr_offset %X, %o : tile<8xptr<f32>>\n"
        "  %x = load %px : tile<8xf32>\n"
        "  %c = cast %x : tile<8x" + d + ">\n"
        "  %w = cast %c : tile<8xi64>\n"
        "  %po = ptr_offset %Out, %o : tile<8xptr<i64>>\n"
        "  store %po, %w\n"
        "}\n");
    ASSERT_NE(p, nullptr);
    for (const char* device : devices()) {
      DeviceRun r(device, p);
      ASSERT_NE(r.k, nullptr);
      metile_arg x = r.buffer(8), out = r.buffer(16);
      std::memcpy(DeviceRun::data(x), in, sizeof in);
      ASSERT_EQ(r.launch({x, out}), METILE_OK) << device << ": " << metile_last_error();
      const auto* got = reinterpret_cast<const int64_t*>(DeviceRun::data(out));
      for (int i = 0; i < 8; ++i)
        EXPECT_EQ(got[i], c.want[i]) << device << " " << d << " from " << in[i];
    }
    metile_program_release(p);
  }
}

TEST(Robust, IntegerLiteralsKeepTheTileType) {
  // A constant that fits stays weak (x + 1 on an i8 tile is i8); a runtime i64 widens.
  metile_builder* b = nullptr;
  metile_type i64 = scalar(METILE_DTYPE_I64);
  metile_value n, o, o8, one, sum, wide, big;
  ASSERT_EQ(metile_builder_create(&b, "weak"), METILE_OK);
  ASSERT_EQ(metile_builder_param(b, "N", &i64, &n), METILE_OK);
  ASSERT_EQ(metile_builder_arange(b, 0, 16, &o), METILE_OK);
  ASSERT_EQ(metile_builder_cast(b, o, METILE_DTYPE_I8, &o8), METILE_OK);
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I64, 1, &one), METILE_OK);
  ASSERT_EQ(metile_builder_binary(b, METILE_OP_ADD, o8, one, &sum), METILE_OK);
  metile_type t{};
  ASSERT_EQ(metile_builder_value_type(b, sum, &t), METILE_OK);
  EXPECT_EQ(t.dtype, METILE_DTYPE_I8);
  ASSERT_EQ(metile_builder_binary(b, METILE_OP_ADD, o, n, &wide), METILE_OK);
  ASSERT_EQ(metile_builder_value_type(b, wide, &t), METILE_OK);
  EXPECT_EQ(t.dtype, METILE_DTYPE_I64);
  // A constant that does not fit the tile's dtype widens it instead of wrapping.
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I64, int64_t{1} << 40, &big), METILE_OK);
  ASSERT_EQ(metile_builder_binary(b, METILE_OP_ADD, o, big, &wide), METILE_OK);
  ASSERT_EQ(metile_builder_value_type(b, wide, &t), METILE_OK);
  EXPECT_EQ(t.dtype, METILE_DTYPE_I64);
  metile_builder_release(b);
}

TEST(Robust, GridProductOverflowIsAnErrorOnEveryDevice) {
  metile_program* p = build_masked_i64_bound();
  for (const char* device : devices()) {
    DeviceRun r(device, p);
    ASSERT_NE(r.k, nullptr);
    metile_arg out = r.buffer(256);
    // 2^66 (wraps u64 to 0) and 2^63 (wraps int64) program instances.
    EXPECT_TRUE(fails_with(r.launch({out, i64_arg(1)}, 1u << 22, 1u << 22, 1u << 22),
                           METILE_ERROR_INVALID_ARGUMENT, "program instances"))
        << device;
    EXPECT_TRUE(fails_with(r.launch({out, i64_arg(1)}, 1u << 21, 1u << 21, 1u << 21),
                           METILE_ERROR_INVALID_ARGUMENT, "2^63"))
        << device;
    metile_launch* l = nullptr;
    const uint32_t ok[3] = {1, 1, 1}, bad[3] = {0xffffffffu, 0xffffffffu, 0xffffffffu};
    std::vector<metile_arg> args = {out, i64_arg(1)};
    ASSERT_EQ(metile_launch_create(&l, r.k, ok, args.data(), 2), METILE_OK);
    EXPECT_TRUE(fails_with(metile_launch_set_grid(l, bad), METILE_ERROR_INVALID_ARGUMENT,
                           "program instances"));
    metile_launch_release(l);
  }
  metile_program_release(p);
}

TEST(Robust, ConstantZeroStepIsAVerifierError) {
  metile_program* p = nullptr;
  std::string text =
      "kernel @k(%X: ptr<f32>) {\n"
      "  %a = const {value = 0} : i32\n"
      "  %b = const {value = 4} : i32\n"
      "  for %i = %a to %b step %a loc(\"z.py\":7) {\n"
      "    yield\n"
      "  }\n"
      "}\n";
  EXPECT_TRUE(fails_with(metile_program_parse(&p, text.c_str()), METILE_ERROR_INVALID_PROGRAM,
                         "z.py:7: for: step is 0"));
  metile_builder* b = nullptr;
  metile_value zero, four, iv;
  ASSERT_EQ(metile_builder_create(&b, "k"), METILE_OK);
  ASSERT_EQ(metile_builder_set_loc(b, "b.py", 3), METILE_OK);
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, 0, &zero), METILE_OK);
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, 4, &four), METILE_OK);
  EXPECT_TRUE(fails_with(metile_builder_for_begin(b, zero, four, zero, nullptr, 0, &iv, nullptr),
                         METILE_ERROR_INVALID_PROGRAM, "b.py:3: for: step is 0"));
  metile_builder_release(b);
}

// Out[0] = number of iterations of `for i = A to B step S`.
const char* const kCountLoop =
    "kernel @count(%Out: ptr<f32>, %A: i32, %B: i32, %S: i32) {\n"
    "  %z = const {value = 0.0} : f32\n"
    "  %one = const {value = 1.0} : f32\n"
    "  %n = for %i = %A to %B step %S iter_args(%c = %z) -> (f32) loc(\"loop.py\":4) {\n"
    "    %c2 = add %c, %one : f32\n"
    "    yield %c2\n"
    "  }\n"
    "  store %Out, %n\n"
    "}\n";

// kCountLoop's loop in the two forms the loop_steps pass checks through the hidden error flag
// (the top-level loop over a parameter step is checked on the host before the launch): a
// computed step, and the loop inside another one.
const char* const kCountLoopComputedStep =
    "kernel @count(%Out: ptr<f32>, %A: i32, %B: i32, %S: i32) {\n"
    "  %z = const {value = 0.0} : f32\n"
    "  %one = const {value = 1.0} : f32\n"
    "  %k = const {value = 1} : i32\n"
    "  %s = mul %S, %k : i32\n"
    "  %n = for %i = %A to %B step %s iter_args(%c = %z) -> (f32) loc(\"loop.py\":4) {\n"
    "    %c2 = add %c, %one : f32\n"
    "    yield %c2\n"
    "  }\n"
    "  store %Out, %n\n"
    "}\n";
const char* const kCountLoopNested =
    "kernel @count(%Out: ptr<f32>, %A: i32, %B: i32, %S: i32) {\n"
    "  %z = const {value = 0.0} : f32\n"
    "  %one = const {value = 1.0} : f32\n"
    "  %k0 = const {value = 0} : i32\n"
    "  %k1 = const {value = 1} : i32\n"
    "  %m = for %j = %k0 to %k1 step %k1 iter_args(%d = %z) -> (f32) {\n"
    "    %n = for %i = %A to %B step %S iter_args(%c = %d) -> (f32) loc(\"loop.py\":4) {\n"
    "      %c2 = add %c, %one : f32\n"
    "      yield %c2\n"
    "    }\n"
    "    yield %n\n"
    "  }\n"
    "  store %Out, %m\n"
    "}\n";

TEST(Robust, RuntimeZeroStep) {
  for (const char* text : {kCountLoop, kCountLoopComputedStep, kCountLoopNested}) {
    metile_program* p = parse(text);
    ASSERT_NE(p, nullptr);
    for (const char* device : devices()) {
      DeviceRun r(device, p);
      ASSERT_NE(r.k, nullptr);
      metile_arg out = r.buffer(1);
      ASSERT_EQ(r.launch({out, i32_arg(0), i32_arg(10), i32_arg(3)}), METILE_OK);
      EXPECT_EQ(DeviceRun::data(out)[0], 4.0f) << device;
      for (int64_t a : {0, 20}) {  // below and above the end: neither may hang
        DeviceRun::data(out)[0] = -1;
        metile_status st = r.launch({out, i32_arg(a), i32_arg(10), i32_arg(0)});
        // The same error on every device: interp and cpu report it as they run; GPU devices
        // run no iteration and report it through the hidden error flag, or find it on the host
        // first (the loop_steps pass).
        EXPECT_TRUE(fails_with(st, METILE_ERROR_DEVICE, "step")) << device << ": " << last_error();
        if (std::string(device) != "interp") {
          EXPECT_NE(last_error().find("loop.py:4"), std::string::npos) << last_error();
        }
      }
      // The kernel still runs correctly after a fault.
      ASSERT_EQ(r.launch({out, i32_arg(10), i32_arg(0), i32_arg(-2)}), METILE_OK);
      EXPECT_EQ(DeviceRun::data(out)[0], 5.0f) << device;
    }
    metile_program_release(p);
  }
}

TEST(Robust, OutOfRangeConstantsAreRejected) {
  metile_program* p = nullptr;
  const std::pair<const char*, const char*> texts[] = {
      {"%c = const {value = 1000} : i8", "1000 does not fit in i8"},
      {"%c = const {value = -1} : u8", "does not fit in u8"},
      {"%c = const {value = 4294967296} : u32", "does not fit in u32"},
      {"%c = const {value = 2147483648} : i32", "does not fit in i32"},
      {"%c = const {value = 2} : bool", "does not fit in bool"},
      {"%c = const {value = 1e30} : f16", "overflows f16"},
      {"%c = const {value = 1e39} : f32", "overflows f32"},
      {"%c = const {value = 1e39} : bf16", "overflows bf16"},
  };
  for (const auto& [line, why] : texts) {
    std::string text = std::string("kernel @k(%X: ptr<f32>) {\n  ") + line + " loc(\"c.py\":2)\n}\n";
    EXPECT_TRUE(fails_with(metile_program_parse(&p, text.c_str()), METILE_ERROR_INVALID_PROGRAM,
                           std::string("c.py:2: const: value ")))
        << line;
    EXPECT_NE(last_error().find(why), std::string::npos) << last_error();
  }
  for (const char* line : {"%c = const {value = 255} : u8", "%c = const {value = -128} : i8",
                           "%c = const {value = 4294967295} : u32", "%c = const {value = inf} : f16",
                           "%c = const {value = 65504.0} : f16", "%c = const {value = -inf} : bf16"}) {
    std::string text = std::string("kernel @k(%X: ptr<f32>) {\n  ") + line + "\n}\n";
    EXPECT_EQ(metile_program_parse(&p, text.c_str()), METILE_OK) << line << ": " << last_error();
    metile_program_release(p);
  }
  metile_builder* b = nullptr;
  metile_value v;
  ASSERT_EQ(metile_builder_create(&b, "k"), METILE_OK);
  EXPECT_TRUE(fails_with(metile_builder_const_int(b, METILE_DTYPE_I8, 1000, &v),
                         METILE_ERROR_INVALID_ARGUMENT, "const_int: 1000 does not fit in i8"));
  EXPECT_TRUE(fails_with(metile_builder_const_float(b, METILE_DTYPE_F16, 1e30, &v),
                         METILE_ERROR_INVALID_ARGUMENT, "overflows f16"));
  EXPECT_EQ(metile_builder_const_float(b, METILE_DTYPE_F16, INFINITY, &v), METILE_OK);
  EXPECT_EQ(metile_builder_const_int(b, METILE_DTYPE_I8, -128, &v), METILE_OK);
  metile_builder_release(b);
}

// out = x, then `steps` times out = out * 1.0001 + 0.5 (2 * steps element-wise ops).
metile_program* build_chain(int steps) {
  metile_builder* b = nullptr;
  metile_program* p = nullptr;
  metile_type f32p = pointer(METILE_DTYPE_F32);
  metile_value x, y, o, px, v, m, a;
  EXPECT_EQ(metile_builder_create(&b, "chain"), METILE_OK);
  EXPECT_EQ(metile_builder_param(b, "X", &f32p, &x), METILE_OK);
  EXPECT_EQ(metile_builder_param(b, "Y", &f32p, &y), METILE_OK);
  EXPECT_EQ(metile_builder_arange(b, 0, 256, &o), METILE_OK);
  EXPECT_EQ(metile_builder_ptr_offset(b, x, o, &px), METILE_OK);
  EXPECT_EQ(metile_builder_load(b, px, 0, 0, &v), METILE_OK);
  EXPECT_EQ(metile_builder_const_float(b, METILE_DTYPE_F32, 1.0001, &m), METILE_OK);
  EXPECT_EQ(metile_builder_const_float(b, METILE_DTYPE_F32, 0.5, &a), METILE_OK);
  for (int i = 0; i < steps; ++i) {
    EXPECT_EQ(metile_builder_binary(b, METILE_OP_MUL, v, m, &v), METILE_OK);
    EXPECT_EQ(metile_builder_binary(b, METILE_OP_ADD, v, a, &v), METILE_OK);
  }
  EXPECT_EQ(metile_builder_ptr_offset(b, y, o, &px), METILE_OK);
  EXPECT_EQ(metile_builder_store(b, px, v, 0), METILE_OK);
  EXPECT_EQ(metile_builder_finish(b, &p), METILE_OK) << metile_last_error();
  metile_builder_release(b);
  return p;
}

TEST(Robust, TenThousandOpChainCompilesAndRunsOnEveryDevice) {
  const int steps = 5000;
  metile_program* p = build_chain(steps);
  ASSERT_NE(p, nullptr);
  for (const char* device : devices()) {
    DeviceRun r(device, p);
    ASSERT_NE(r.k, nullptr);
    metile_arg x = r.buffer(256), y = r.buffer(256);
    for (int i = 0; i < 256; ++i) DeviceRun::data(x)[i] = static_cast<float>(i % 7) - 3.0f;
    ASSERT_EQ(r.launch({x, y}), METILE_OK) << device << ": " << metile_last_error();
    for (int i = 0; i < 256; i += 37) {
      double want = static_cast<double>(i % 7) - 3.0;
      for (int s = 0; s < steps; ++s) want = want * 1.0001 + 0.5;
      // f32 rounding over 10k dependent ops: a relative error well under 1e-3.
      EXPECT_NEAR(DeviceRun::data(y)[i], want, std::fabs(want) * 1e-3) << device << " i=" << i;
    }
  }
  metile_program_release(p);
}

TEST(Robust, TooManyOpsIsAClearError) {
  // The limit (2^20 ops) is checked when the program is verified, before any backend runs.
  metile_builder* b = nullptr;
  metile_program* p = nullptr;
  metile_value v, one;
  ASSERT_EQ(metile_builder_create(&b, "big"), METILE_OK);
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, 0, &v), METILE_OK);
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, 1, &one), METILE_OK);
  for (int i = 0; i < (1 << 20); ++i) ASSERT_EQ(metile_builder_binary(b, METILE_OP_ADD, v, one, &v), METILE_OK);
  EXPECT_TRUE(fails_with(metile_builder_finish(b, &p), METILE_ERROR_INVALID_PROGRAM,
                         "more than 1048576 ops"));
  metile_builder_release(b);
}

TEST(Robust, TileOf2To24ElementsRunsOrIsRefusedClearly) {
  const int64_t n = int64_t{1} << 24;
  std::string text = "kernel @big(%Out: ptr<f32>) {\n"
                     "  %z = const {value = 0} : i32\n"
                     "  %o = arange %z {size = " + std::to_string(n) + "} : tile<" + std::to_string(n) + "xi32>\n"
                     "  %f = cast %o : tile<" + std::to_string(n) + "xf32>\n"
                     "  %one = const {value = 1.0} : f32\n"
                     "  %v = add %f, %one : tile<" + std::to_string(n) + "xf32>\n"
                     "  %p = ptr_offset %Out, %o : tile<" + std::to_string(n) + "xptr<f32>>\n"
                     "  store %p, %v\n"
                     "}\n";
  metile_program* p = parse(text);
  ASSERT_NE(p, nullptr);
  for (const char* device : devices()) {
    if (std::string(device) != "interp" && std::string(device) != "cpu") {
      // GPU devices: past the per-thread element limit (GpuTarget), a clear error before any
      // compiler runs.
      metile_device* dev = nullptr;
      metile_kernel* k = nullptr;
      ASSERT_EQ(metile_device_open(&dev, device), METILE_OK);
      EXPECT_TRUE(fails_with(metile_kernel_compile(&k, dev, p, nullptr), METILE_ERROR_UNSUPPORTED,
                             "elements per thread"))
          << device;
      metile_device_release(dev);
      continue;
    }
    DeviceRun r(device, p);
    ASSERT_NE(r.k, nullptr);
    metile_arg out = r.buffer(n);
    ASSERT_EQ(r.launch({out}), METILE_OK) << device << ": " << metile_last_error();
    for (int64_t i : {int64_t{0}, int64_t{12345}, n - 1})
      EXPECT_EQ(DeviceRun::data(out)[i], static_cast<float>(i) + 1.0f) << device << " i=" << i;
  }
  metile_program_release(p);
}

// metile_cancel_launches from another thread stops a launch of 2^31 program instances on each
// host device, and the kernel runs normally afterwards. The canceller repeats until the launch
// returns: a cancel that comes before the launch starts does not count for it.
TEST(Robust, CancelStopsARunningLaunchOnEveryHostDevice) {
  metile_program* p = build_masked_i64_bound();
  for (const char* device : {"interp", "cpu", "metal-sim"}) {
    DeviceRun r(device, p);
    ASSERT_NE(r.k, nullptr);
    metile_arg out = r.buffer(256);
    std::atomic<bool> done{false};
    std::thread canceller([&] {
      while (!done.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        metile_cancel_launches();
      }
    });
    metile_status st = r.launch({out, i64_arg(256)}, 1u << 31);
    done = true;
    canceller.join();
    EXPECT_TRUE(fails_with(st, METILE_ERROR_DEVICE, "cancelled")) << device;
    metile_cancel_launches();  // before a launch: it runs to the end
    DeviceRun::data(out)[255] = 0;
    ASSERT_EQ(r.launch({out, i64_arg(256)}, 3), METILE_OK) << device << ": " << last_error();
    EXPECT_EQ(DeviceRun::data(out)[255], 256.0f) << device;
  }
  metile_program_release(p);
}

}  // namespace
