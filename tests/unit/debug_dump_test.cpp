// METILE_DEBUG: any stage a user names is dumped whichever device compiles the kernel (the fake
// device produces none of them), and an unknown name is a warning listing the stages.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "cache/cache.h"
#include "cache_fake_device.h"
#include "driver/compile.h"
#include "support/debug_dump.h"

namespace metile {
namespace METILE_UNITY_ID {

using test::FakeDevice;
using test::store_const;
using test::TempDir;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Compiles `name` on a fake device without caching, with METILE_DEBUG=`debug` and dumps in `dir`.
void compile_with_debug(const std::string& name, const char* debug, const std::string& dir) {
  Cache cache(default_cache_identity());
  ::setenv("METILE_DEBUG", debug, 1);
  ::setenv("METILE_DEBUG_DIR", dir.c_str(), 1);
  CompileOptions options;
  options.no_cache = true;
  compile_kernel(cache, std::make_shared<FakeDevice>("fake v1", 64), store_const(name, 3), options);
  ::unsetenv("METILE_DEBUG");
  ::unsetenv("METILE_DEBUG_DIR");
}

TEST(DebugDump, StagesTheDeviceDoesNotProduceAreGenerated) {
  TempDir dumps;
  compile_with_debug("staged", "msl,cuda,cpp,gpu_ir,gpu_ir_opt", dumps.path());
  std::string msl = read_text(dumps.path() + "/staged.msl.txt");
  EXPECT_NE(msl.find("[[kernel]] void staged"), std::string::npos) << msl;
  std::string cuda = read_text(dumps.path() + "/staged.cuda.txt");
  EXPECT_NE(cuda.find("__global__"), std::string::npos) << cuda;
  std::string cpp = read_text(dumps.path() + "/staged.cpp.txt");
  EXPECT_NE(cpp.find("extern \"C\""), std::string::npos) << cpp;
  EXPECT_FALSE(read_text(dumps.path() + "/staged.gpu_ir.txt").empty());
  EXPECT_FALSE(read_text(dumps.path() + "/staged.gpu_ir_opt.txt").empty());
  // Not named: not dumped.
  EXPECT_FALSE(std::filesystem::exists(dumps.path() + "/staged.tile_ir.txt"));
}

TEST(DebugDump, OnlyTheNamedStagesAreWritten) {
  TempDir dumps;
  compile_with_debug("one", "cpp", dumps.path());
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dumps.path()))
    files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"one.cpp.txt"});
}

TEST(DebugDump, AnUnknownStageIsAWarningListingTheStages) {
  TempDir dumps;
  testing::internal::CaptureStderr();
  compile_with_debug("unknown", "tile_ir,no_such_stage", dumps.path());
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning: METILE_DEBUG names an unknown stage 'no_such_stage'"),
            std::string::npos) << err;
  for (Stage s : kStages) EXPECT_NE(err.find(stage_name(s)), std::string::npos) << err;
  // The known stage is still dumped; the compile succeeded.
  EXPECT_TRUE(std::filesystem::exists(dumps.path() + "/unknown.tile_ir.txt"));
}

TEST(DebugDump, StageNamesRoundTrip) {
  ::setenv("METILE_DEBUG", "cuda,tile_ir", 1);
  EXPECT_EQ(debug_stages(), (std::vector<Stage>{Stage::tile_ir, Stage::cuda}));
  ::setenv("METILE_DEBUG", "all", 1);
  EXPECT_EQ(debug_stages().size(), kStages.size());
  EXPECT_TRUE(debug_stage_enabled("any_text_a_device_keeps"));
  ::unsetenv("METILE_DEBUG");
  EXPECT_TRUE(debug_stages().empty());
  EXPECT_FALSE(debug_stage_enabled("msl"));
}

}  // namespace
}  // namespace metile
