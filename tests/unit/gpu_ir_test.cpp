// GPU IR data structures, printer and verifier.
#include <gtest/gtest.h>

#include "ir/gpu_ir.h"
#include "support/error.h"

namespace metile::gpu {
namespace METILE_UNITY_ID {

// A small function: out[i] = x[i] * 2 over a 1024-element tile in a 256-thread group.
struct Fixture {
  Function f;
  LayoutId tile;
  ValueId x, out, n;

  Fixture() {
    f.name = "scale";
    f.threads = 256;
    tile = f.add_layout(tile_layout(1024, make_layout(256, 4), make_layout(4, 1)));
    x = param("x", DType::f32, true);
    out = param("out", DType::f32, true);
    n = param("n", DType::i32, false);
  }
  ValueId param(const std::string& name, DType d, bool ptr) {
    Value v;
    v.dtype = d;
    v.is_ptr = ptr;
    v.stem = name;
    ValueId id = f.new_value(v);
    f.params.push_back({name, id});
    return id;
  }
  ValueId tid(GpuBuilder& b) { return b.named(b.builtin(Builtin::thread_index, 0, kThread), "tid"); }
  void build() {
    GpuBuilder b(f, &f.body);
    ValueId idx = b.named(b.coord(tile, tid(b)), "idx");
    ValueId mask = b.named(b.ew(OpKind::LT, {idx, n}), "mask");
    ValueId xs = b.ew(OpKind::PTR_OFFSET, {x, idx});
    ValueId v = b.named(b.load(xs, mask, b.constant_float(DType::f32, 0.0)), "v");
    ValueId two = b.constant_float(DType::f32, 2.0);
    b.store(b.ew(OpKind::PTR_OFFSET, {out, idx}), b.ew(OpKind::MUL, {v, two}), mask);
  }
};

TEST(GpuIr, LayoutMapsThreadsAndRegistersToElements) {
  Layout l = tile_layout(2000, make_layout(256, 4), make_layout(tup(4, 2), tup(1, 1024)));
  EXPECT_EQ(l.regs(), 8);
  EXPECT_EQ(l.element(0, 0), 0);
  EXPECT_EQ(l.element(1, 0), 4);
  EXPECT_EQ(l.element(1, 3), 7);
  EXPECT_EQ(l.element(1, 4), 1028);
  EXPECT_EQ(l.element(255, 7), 255 * 4 + 3 + 1024);
  Function f;
  f.threads = 256;
  LayoutId id = f.add_layout(l);
  EXPECT_TRUE(f.layout(id).padded);  // 2048 slots for 2000 elements
  EXPECT_EQ(f.add_layout(l), id);    // deduplicated
  l = tile_layout(2048, l.thr, l.reg);
  EXPECT_FALSE(f.layout(f.add_layout(l)).padded);
  EXPECT_EQ(f.layout(id).str(), "tile<2000> thr=256:4 reg=(4,2):(1,1024) padded");
}

TEST(GpuIr, PrintsTypedValuesWithLayouts) {
  Fixture fx;
  fx.build();
  verify(fx.f);
  std::string text = print(fx.f);
  EXPECT_NE(text.find("gpu_kernel @scale(%x: ptr<f32>, %out: ptr<f32>, %n: i32) threads=256"),
            std::string::npos) << text;
  EXPECT_NE(text.find("#2 = tile<1024> thr=256:4 reg=4:1"), std::string::npos) << text;
  EXPECT_NE(text.find("%idx: i32 x4 #2 = coord #2 %tid"), std::string::npos) << text;
  EXPECT_NE(text.find("%mask: bool x4 #2 = lt %idx, %n"), std::string::npos) << text;
  EXPECT_NE(text.find("%v: f32 x4 #2 = load "), std::string::npos) << text;
  EXPECT_NE(text.find("store "), std::string::npos) << text;
}

TEST(GpuIr, NamesAreUniqueAndAvoidReservedWords) {
  Fixture fx;
  GpuBuilder b(fx.f, &fx.f.body);
  ValueId t = fx.tid(b);
  ValueId a = b.named(b.coord(fx.tile, t), "float");
  ValueId c = b.named(b.coord(fx.tile, t), "idx");
  ValueId d = b.named(b.coord(fx.tile, t), "idx");
  ValueId e = b.named(b.coord(fx.tile, t), "x");  // clashes with the parameter
  auto names = name_values(fx.f, {"float"});
  EXPECT_EQ(names[fx.x], "x");
  EXPECT_EQ(names[a], "float1");
  EXPECT_EQ(names[c], "idx");
  EXPECT_EQ(names[d], "idx1");
  EXPECT_EQ(names[e], "x1");
}

template <typename F>
void expect_invalid(Function& f, F&& mutate, const std::string& needle) {
  mutate(f);
  try {
    verify(f);
    FAIL() << "expected a verifier error containing: " << needle << "\n" << print(f);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INTERNAL);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GpuIr, VerifierRejectsUseBeforeDefinition) {
  Fixture fx;
  fx.build();
  expect_invalid(fx.f, [](Function& f) { std::swap(f.body.ops[1], f.body.ops[2]); },
                 "is used where it is not defined");
}

TEST(GpuIr, VerifierRejectsMixedLayouts) {
  Fixture fx;
  fx.build();
  Layout other = tile_layout(256, make_layout(256, 1), make_layout(1, 0));
  LayoutId l2 = fx.f.add_layout(other);
  expect_invalid(fx.f, [&](Function& f) {
    GpuBuilder b(f, &f.body);
    ValueId i = b.coord(l2, f.body.ops[0].result());
    Op op;
    op.kind = GpuOpKind::ELEMENTWISE;
    op.tile_op = OpKind::ADD;
    op.operands = {i, f.body.ops[1].result()};
    op.results = {b.new_value(DType::i32, l2)};
    b.append(op);
  }, "operands have different layouts");
}

TEST(GpuIr, VerifierRejectsBadTypes) {
  Fixture fx;
  fx.build();
  expect_invalid(fx.f, [&](Function& f) {
    GpuBuilder b(f, &f.body);
    Op op;
    op.kind = GpuOpKind::STORE;
    op.operands = {fx.x, fx.n};  // i32 value through an f32 pointer
    b.append(op);
  }, "value type must be the pointee type f32");
}

// The builtin and the reduction are enums; a value outside them (a corrupted op) is refused.
TEST(GpuIr, VerifierRejectsUnknownBuiltinsAndReductions) {
  Fixture fx;
  fx.build();
  expect_invalid(fx.f, [&](Function& f) {
    GpuBuilder b(f, &f.body);
    f.body.ops[0].builtin = static_cast<Builtin>(kBuiltinCount);
    (void)b;
  }, "unknown builtin 5");
  Fixture fy;
  fy.build();
  expect_invalid(fy.f, [&](Function& f) {
    GpuBuilder b(f, &f.body);
    ValueId t = b.builtin(Builtin::simd_lane, 0, kThread);
    b.simd_reduce(Reduction::sum, t);
    f.body.ops.back().reduce = static_cast<Reduction>(7);
  }, "reduction must be sum, max or min");
}

TEST(GpuIr, PrinterNamesBuiltinsAndReductions) {
  Fixture fx;
  GpuBuilder b(fx.f, &fx.f.body);
  ValueId lane = b.builtin(Builtin::simd_lane, 0, kThread);
  ValueId pid = b.builtin(Builtin::threadgroup_position, 1, kUniform);
  b.simd_reduce(Reduction::max, b.ew(OpKind::ADD, {lane, pid}));
  verify(fx.f);
  std::string text = print(fx.f);
  EXPECT_NE(text.find("builtin simd_lane.x"), std::string::npos) << text;
  EXPECT_NE(text.find("builtin threadgroup_position.y"), std::string::npos) << text;
  EXPECT_NE(text.find("simd_reduce.max"), std::string::npos) << text;
}

TEST(GpuIr, VerifierChecksLoops) {
  Fixture fx;
  GpuBuilder b(fx.f, &fx.f.body);
  ValueId zero = b.constant_int(DType::i32, 0), one = b.constant_int(DType::i32, 1);
  ValueId acc0 = b.constant_float(DType::f32, 0.0);
  Op loop;
  loop.kind = GpuOpKind::FOR;
  loop.operands = {zero, fx.n, one, acc0};
  loop.regions.emplace_back();
  ValueId iv = b.new_value(DType::i32, kUniform);
  ValueId acc = b.new_value(DType::f32, kUniform);
  loop.regions[0].args = {iv, acc};
  loop.results = {b.new_value(DType::f32, kUniform)};
  GpuBuilder in(fx.f, &loop.regions[0]);
  ValueId next = in.ew(OpKind::ADD, {acc, acc});
  Op y;
  y.kind = GpuOpKind::YIELD;
  y.operands = {next};
  in.append(y);
  b.append(loop);
  verify(fx.f);
  std::string text = print(fx.f);
  EXPECT_NE(text.find("for %t: i32 = %c to %n step %c1 iter(%t1: f32 = %c2) -> (%t3)"), std::string::npos) << text;
  EXPECT_NE(text.find("iter("), std::string::npos) << text;
  EXPECT_NE(text.find("yield"), std::string::npos) << text;

  Function bad = fx.f;
  expect_invalid(bad, [](Function& f) { f.body.ops.back().body().ops.pop_back(); },
                 "loop body does not end in yield");
  Function bad2 = fx.f;
  expect_invalid(bad2, [&](Function& f) {
    // yield an i32 where an f32 is carried
    f.body.ops.back().body().ops.back().operands = {iv};
  }, "yielded value 0 has the wrong type");
  Function bad3 = fx.f;
  expect_invalid(bad3, [&](Function& f) {
    GpuBuilder inner(f, &f.body.ops.back().body());
    Op a;
    a.kind = GpuOpKind::ALLOC;
    a.attrs = {{"size", int64_t{4}}};
    a.results = {inner.new_value(DType::f32, kUniform, true, AddrSpace::threadgroup)};
    auto& ops = f.body.ops.back().body().ops;
    ops.insert(ops.begin(), a);
  }, "threadgroup allocations belong at the top level");
}

TEST(GpuIr, VerifierChecksLayoutsCoverTheGroup) {
  Fixture fx;
  fx.build();
  expect_invalid(fx.f, [](Function& f) { f.threads = 128; }, "covers 256 threads, the group has 128");
}

// threadgroup_bytes: the end of the highest array, to a multiple of 16; padded rows count.
TEST(GpuIr, ThreadgroupBytesEndAtTheHighestArray) {
  Fixture fx;
  GpuBuilder b(fx.f, &fx.f.body);
  b.alloc(DType::f32, SharedArray::linear({3}), "a");  // 12 bytes
  b.alloc(DType::f16, SharedArray::padded({4, 8}, 8, 2), "b");  // 2 stages of 4 rows of 16: 256 bytes
  SharedArray a = SharedArray::linear({3});
  a.offset = 256;
  a.write(fx.f.body.ops[fx.f.body.ops.size() - 2]);
  SharedArray p = SharedArray::padded({4, 8}, 8, 2);
  p.offset = 0;
  p.write(fx.f.body.ops.back());
  EXPECT_EQ(threadgroup_bytes(fx.f), 272u);
  verify(fx.f);
}

}  // namespace
}  // namespace metile::gpu
