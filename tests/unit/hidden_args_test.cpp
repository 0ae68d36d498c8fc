// with_hidden_args (src/runtime/hidden_args.cpp): the wrapper that passes the Tile IR passes'
// hidden parameters keeps what the wrapped kernel reports.
#include <gtest/gtest.h>

#include <memory>

#include "passes/tile/tile_pass.h"
#include "runtime/hidden_args.h"

namespace metile {
namespace METILE_UNITY_ID {

class RegistersKernel final : public Kernel {
 public:
  std::unique_ptr<PreparedLaunch> prepare(const Grid&, std::vector<LaunchArg>) override { return nullptr; }
  int registers_per_thread() const override { return 42; }
};

TEST(HiddenArgs, TheWrapperReportsTheWrappedKernelsRegisters) {
  TileHiddenArgs hidden;
  hidden.error_flag = true;  // a kernel with a hidden parameter is wrapped
  auto wrapped = with_hidden_args(std::make_shared<RegistersKernel>(), std::make_shared<Program>(),
                                  hidden, nullptr);
  EXPECT_NE(dynamic_cast<RegistersKernel*>(wrapped.get()), wrapped.get());
  EXPECT_EQ(wrapped->registers_per_thread(), 42);
}

}  // namespace
}  // namespace metile
