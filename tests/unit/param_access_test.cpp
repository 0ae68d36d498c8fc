// Pointer provenance (src/ir/pointer_provenance.h) as param_access reports it on Tile IR text:
// a loop-carried pointer counts as the parameters its init and yields may point into, no more
// (the GPU emitter's `const` pointers come from the same fixed point) and no less.
#include <gtest/gtest.h>

#include <string>

#include "ir/param_access.h"
#include "ir/tile_ir.h"

namespace metile {
namespace METILE_UNITY_ID {

// A pointer walks along %X in a loop; `next` is the carried pointer's next value (from %11, the
// carried %7, and %Out) and the loop body loads through the carried pointer.
std::string walking(const std::string& next, const std::string& store_through_carried = "") {
  return R"(kernel @walk(%X: ptr<f32>, %Out: ptr<f32>, %N: i32) {
  %0 = const {value = 0} : i32
  %1 = const {value = 1} : i32
  %2 = const {value = 0.0} : f32
  %3, %4 = for %5 = %0 to %N step %1 iter_args(%7 = %X, %8 = %2) -> (ptr<f32>, f32) {
    %9 = load %7 : f32
    %10 = add %8, %9 : f32
    %11 = ptr_offset %7, %1 : ptr<f32>
)" + next + store_through_carried + R"(
    yield %12, %10
  }
  store %Out, %4
}
)";
}

ValueId param(const Program& p, const std::string& name) {
  for (const Param& prm : p.params)
    if (prm.name == name) return prm.value;
  ADD_FAILURE() << "no parameter " << name;
  return kNoValue;
}

TEST(ParamAccess, CarriedPointerIntoAReadOnlyBufferIsNotWritten) {
  // Before provenance was one fixed point, a carried pointer counted as every parameter, so
  // %Out was "read" and %X "written" here.
  Program p = parse(walking("    %12 = ptr_offset %11, %0 : ptr<f32>"));
  ParamAccess a = param_access(p);
  EXPECT_EQ(a.read, (std::set<ValueId>{param(p, "X")}));
  EXPECT_EQ(a.written, (std::set<ValueId>{param(p, "Out")}));
}

TEST(ParamAccess, CarriedPointerThatMovesToAnotherBufferCountsBoth) {
  // The yield may hand on %Out, so the load through the carried pointer may read %Out as well.
  Program p = parse(walking("    %13 = lt %5, %1 : bool\n    %12 = select %13, %11, %Out : ptr<f32>"));
  ParamAccess a = param_access(p);
  EXPECT_EQ(a.read, (std::set<ValueId>{param(p, "X"), param(p, "Out")}));
  EXPECT_EQ(a.written, (std::set<ValueId>{param(p, "Out")}));
}

TEST(ParamAccess, StoreThroughCarriedPointerWritesItsOrigins) {
  Program p = parse(walking("    %12 = ptr_offset %11, %0 : ptr<f32>", "\n    store %7, %10"));
  ParamAccess a = param_access(p);
  EXPECT_EQ(a.read, (std::set<ValueId>{param(p, "X")}));
  EXPECT_EQ(a.written, (std::set<ValueId>{param(p, "X"), param(p, "Out")}));
}

}  // namespace
}  // namespace metile
