// The kernel suite on every device that can start here: each registered device whose probe()
// is empty joins automatically (interp today; cpu, metal-sim, cuda, metal once registered).
// Each case is compared with its float64 reference and, off interp, with interp's output.
// A GPU backend that reports METILE_ERROR_UNSUPPORTED for a kernel skips it (the message names
// the op); interp and cpu must run everything.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "runtime/device.h"

namespace metile {
namespace METILE_UNITY_ID {

struct Param {
  std::string device;
  std::string kcase;
};

void PrintTo(const Param& p, std::ostream* os) { *os << p.device << " " << p.kcase; }

std::vector<Param> params() {
  std::vector<Param> out;
  for (const DeviceEntry& e : device_registry()) {
    if (!e.probe().empty()) continue;
    for (const std::string& c : kernels::case_names()) out.push_back({e.name, c});
  }
  return out;
}

std::string param_name(const testing::TestParamInfo<Param>& info) {
  std::string s = info.param.device + "_" + info.param.kcase;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

class KernelSuite : public testing::TestWithParam<Param> {};

TEST_P(KernelSuite, MatchesReference) {
  const Param& p = GetParam();
  const kernels::Case c = kernels::make_case(p.kcase);
  const kernels::RunResult r = kernels::run_case(p.device, c);
  const bool must_run = p.device == "interp" || p.device == "cpu";
  if (r.status == METILE_ERROR_UNSUPPORTED && !must_run) GTEST_SKIP() << r.message;
  ASSERT_EQ(r.status, METILE_OK) << metile_status_name(r.status) << ": " << r.message;
  EXPECT_EQ(kernels::compare(r.outputs, c.expected, c.rtol, c.atol), "") << "vs float64 reference";
  if (p.device == "interp") return;
  const kernels::RunResult ref = kernels::run_case("interp", c);
  ASSERT_EQ(ref.status, METILE_OK) << ref.message;
  EXPECT_EQ(kernels::compare(r.outputs, ref.outputs, c.rtol, c.atol), "") << "vs interp";
}

INSTANTIATE_TEST_SUITE_P(Devices, KernelSuite, testing::ValuesIn(params()), param_name);

}  // namespace
}  // namespace metile
