// Time limits (METILE_TIMEOUT_S): the host process runner kills a hung tool with its process
// group and cleans its temporary directory; a hung host compiler is a clear COMPILE error; huge
// loops on interp and metal-sim stop with an error naming the kernel.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cache_fake_device.h"
#include "kernels/launch.h"
#include "runtime/cpu/toolchain.h"
#include "runtime/host/process.h"
#include "runtime/metal_sim/msl_prepare.h"
#include "runtime/metal_sim/toolchain.h"
#include "support/error.h"
#include "scoped_env.h"

namespace metile {
namespace METILE_UNITY_ID {

using test::TempDir;

using test::ScopedEnv;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// True once process `pid` is gone or a zombie (killed, not yet reaped by its new parent).
bool dead(pid_t pid) {
  for (int i = 0; i < 400; ++i) {
    std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
    size_t close = stat.rfind(')');
    if (stat.empty() || (close != std::string::npos && stat.substr(close + 2, 1) == "Z")) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A stand-in compiler: answers --version, refuses the -march probes, and otherwise starts a
// long sleep in the background (a grandchild, as cc1plus is) and waits for it, recording pids.
std::string write_hung_compiler(const std::string& dir) {
  std::string path = dir + "/hung-c++";
  // Options are matched one argument at a time: a temporary path may contain "-Q" too.
  std::ofstream(path) << "#!/bin/sh\n"
                         "for a in \"$@\"; do case \"$a\" in --version) echo 'hung 1.0'; exit 0;; -Q*|-###) exit 1;; esac; done\n"
                         "echo $$ > " << dir << "/driver.pid\n"
                         "sleep 60 &\n"
                         "echo $! > " << dir << "/child.pid\n"
                         "wait\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(HostProcess, CapturesOutputAndExitStatus) {
  host::ProcessResult r = host::run_process({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 10);
  EXPECT_TRUE(r.started);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_NE(r.output.find("out"), std::string::npos);
  EXPECT_NE(r.output.find("err"), std::string::npos);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(host::run_process({"true"}, 0).ok()) << "looked up on PATH, no limit";
  host::ProcessResult missing = host::run_process({"/nonexistent/tool"}, 1);
  EXPECT_FALSE(missing.started);
  EXPECT_NE(missing.failure.find("cannot run /nonexistent/tool"), std::string::npos);
  // No shell: metacharacters are plain arguments.
  host::ProcessResult echo = host::run_process({"echo", "$(id)", ";", "x"}, 10);
  EXPECT_EQ(echo.output, "$(id) ; x\n");
}

// run_command: the toolchains' status-and-output form of run_process (cpu compiler, xcrun).
TEST(HostProcess, RunCommandGivesStatusAndOutput) {
  std::string out;
  EXPECT_EQ(host::run_command({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, &out), 3);
  EXPECT_EQ(out, "out\nerr\n");
  EXPECT_EQ(host::run_command({"/bin/sh", "-c", "kill -9 $$"}, &out), 128 + 9);
  EXPECT_EQ(host::run_command({"/nonexistent/tool"}, &out), -1);
  EXPECT_NE(out.find("cannot run /nonexistent/tool"), std::string::npos) << out;
  EXPECT_EQ(host::run_command({"true"}, nullptr), 0);
}

TEST(HostProcess, TimeoutKillsTheWholeGroupAndCleansUp) {
  TempDir dir, tmp;
  ScopedEnv tmpdir("TMPDIR", tmp.path());
  std::string script = dir.path() + "/tool";
  std::ofstream(script) << "#!/bin/sh\nsleep 60 &\necho $! > " << dir.path() << "/child.pid\nwait\n";
  ::chmod(script.c_str(), 0755);
  auto start = std::chrono::steady_clock::now();
  host::ProcessResult r = host::run_process({script}, 0.5);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.timed_out);
  EXPECT_NE(r.failure.find("did not finish within 0.5 s"), std::string::npos) << r.failure;
  EXPECT_LT(took, 30.0) << "not killed at the limit";
  pid_t child = std::atoi(read_text(dir.path() + "/child.pid").c_str());
  ASSERT_GT(child, 0);
  EXPECT_TRUE(dead(child)) << "the tool's own child survived the timeout";
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path())) << "the runner's temp directory was left";
}

TEST(HostProcess, RunBoundedGivesUpOnLongWork) {
  EXPECT_TRUE(host::run_bounded([] {}, 5));
  auto flag = std::make_shared<std::atomic<bool>>(false);
  EXPECT_FALSE(host::run_bounded(
      [flag] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        *flag = true;
      },
      0.05));
  EXPECT_FALSE(flag->load()) << "returned only after the work finished";
}

TEST(HostProcess, TimeoutSettingComesFromTheEnvironment) {
  {
    ScopedEnv e("METILE_TIMEOUT_S", "2.5");
    EXPECT_EQ(host::compile_timeout_s(), 2.5);
    EXPECT_EQ(host::launch_timeout_s(), 2.5);
  }
  // Limits whose deadline would overflow steady_clock (about 9.2e9 s) are no limit, not a
  // deadline in the past.
  for (const char* none : {"inf", "1e10", "1e300", "1000000000.5"}) {
    ScopedEnv e("METILE_TIMEOUT_S", none);
    EXPECT_EQ(host::compile_timeout_s(), 0) << none;
    EXPECT_EQ(host::launch_timeout_s(), 0) << none;
  }
  {
    ScopedEnv e("METILE_TIMEOUT_S", "1e9");
    EXPECT_EQ(host::launch_timeout_s(), 1e9);
  }
  {
    ScopedEnv e("METILE_TIMEOUT_S", "soon");
    EXPECT_EQ(host::compile_timeout_s(), host::kDefaultCompileTimeoutS);
    EXPECT_EQ(host::launch_timeout_s(), 0);
  }
}

TEST(TimeLimit, HungHostCompilerIsAClearCompileErrorFast) {
  TempDir dir, tmp;
  ScopedEnv cxx("METILE_CXX", write_hung_compiler(dir.path()));
  ScopedEnv limit("METILE_TIMEOUT_S", "1");
  ScopedEnv tmpdir("TMPDIR", tmp.path());
  cpu::Toolchain tc = cpu::current_toolchain();
  auto start = std::chrono::steady_clock::now();
  try {
    cpu::compile_shared_object(tc, "int x;\n", "stuck");
    FAIL() << "a hung compiler returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_COMPILE);
    std::string m = e.what();
    EXPECT_NE(m.find("compiling kernel stuck failed (timed out"), std::string::npos) << m;
    EXPECT_NE(m.find("METILE_TIMEOUT_S"), std::string::npos) << m;
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  pid_t child = std::atoi(read_text(dir.path() + "/child.pid").c_str());
  ASSERT_GT(child, 0);
  EXPECT_TRUE(dead(child));
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path())) << "the compile's temp directory was left";
}

// out[0] = the number of iterations of a loop to N (a float sum of ones).
const char* kSpin =
    "kernel @spin(%X: ptr<f32>, %N: i32) {\n"
    "  %0 = const {value = 0} : i32\n"
    "  %1 = const {value = 1} : i32\n"
    "  %2 = const {value = 0.0} : f32\n"
    "  %3 = for %i = %0 to %N step %1 iter_args(%c = %2) -> (f32) {\n"
    "    %4 = const {value = 1.0} : f32\n"
    "    %5 = add %c, %4 : f32\n"
    "    yield %5\n"
    "  }\n"
    "  store %X, %3\n"
    "}\n";

void expect_loop_stops(const std::string& device) {
  Program p = parse(kSpin);
  {  // A short loop runs to the end under the same limit.
    ScopedEnv limit("METILE_TIMEOUT_S", "20");
    std::vector<float> out(1, 0);
    kernels::Launch small(p, device);
    small.buffer(out).i32(100);
    ASSERT_EQ(small.run(), METILE_OK) << small.error();
    EXPECT_EQ(out[0], 100.0f);
  }
  ScopedEnv limit("METILE_TIMEOUT_S", "0.5");
  std::vector<float> out(1, 0);
  kernels::Launch huge(p, device);
  huge.buffer(out).i32(2147483647);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(huge.run(), METILE_ERROR_DEVICE);
  EXPECT_NE(huge.error().find("spin"), std::string::npos) << huge.error();
  EXPECT_NE(huge.error().find("did not finish within 0.5 s (METILE_TIMEOUT_S)"), std::string::npos)
      << huge.error();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
}

// Each instance stores 1 to X[0 .. 31]; the grid says how many instances.
const char* kOnes = R"(kernel @ones(%X: ptr<f32>) {
  %0 = const {value = 0} : i32
  %1 = arange %0 {size = 32} : tile<32xi32>
  %2 = ptr_offset %X, %1 : tile<32xptr<f32>>
  %3 = const {value = 1.0} : f32
  store %2, %3
}
)";

void expect_grid_stops(const std::string& device) {
  Program p = parse(kOnes);
  {  // inf is no limit: the launch runs (a deadline that overflowed failed it at once).
    ScopedEnv limit("METILE_TIMEOUT_S", "inf");
    std::vector<float> out(32, 0);
    kernels::Launch small(p, device);
    small.buffer(out);
    ASSERT_EQ(small.run({3, 1, 1}), METILE_OK) << small.error();
    EXPECT_EQ(out[31], 1.0f);
  }
  // 2^48 instances: stopping must not visit each one that is left.
  ScopedEnv limit("METILE_TIMEOUT_S", "0.5");
  std::vector<float> out(32, 0);
  kernels::Launch huge(p, device);
  huge.buffer(out);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(huge.run({65536, 65536, 65536}), METILE_ERROR_DEVICE);
  EXPECT_NE(huge.error().find("did not finish within 0.5 s (METILE_TIMEOUT_S)"), std::string::npos)
      << huge.error();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0);
}

TEST(TimeLimit, HugeGridOnInterpStops) { expect_grid_stops("interp"); }

TEST(TimeLimit, HugeGridOnMetalSimStops) {
  if (!metal_sim::probe_clang().unavailable.empty())
    GTEST_SKIP() << metal_sim::probe_clang().unavailable;
  expect_grid_stops("metal-sim");
}

TEST(TimeLimit, MetalSimLoopsGetATimeCheck) {
  std::string src =
      "kernel void k() {\n"
      "  for (int i = 0; i < 4; ++i) { x(); }\n"
      "  while (a) {\n  }\n"
      "  do { } while (b);\n"
      "  for (;;) y();\n"
      "}\n";
  std::string out = metal_sim::prepare_msl(src, "k.metal", nullptr);
  size_t ticks = 0;
  for (size_t at = out.find("loop_tick()"); at != std::string::npos; at = out.find("loop_tick()", at + 1))
    ++ticks;
  EXPECT_EQ(ticks, 3u) << out;  // the unbraced loop is left alone
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), std::count(src.begin(), src.end(), '\n'));
}

TEST(TimeLimit, HugeLoopOnInterpStops) { expect_loop_stops("interp"); }

TEST(TimeLimit, HugeLoopOnMetalSimStops) {
  if (!metal_sim::probe_clang().unavailable.empty())
    GTEST_SKIP() << metal_sim::probe_clang().unavailable;
  expect_loop_stops("metal-sim");
}

}  // namespace
}  // namespace metile
