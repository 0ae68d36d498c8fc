#include "target/options.h"

#include <sstream>

namespace metile {

std::string CompileOptions::key() const {
  std::ostringstream os;
  os << "num_threads=" << num_threads << ";allow_tf32=" << allow_tf32 << ";opt_level=" << opt_level;
  if (dot_precision != 0) os << ";dot_precision=" << dot_precision;
  if (check_bounds) os << ";check_bounds";
  if (unchecked) os << ";unchecked";
  if (!fuse_reductions) os << ";no_fuse_reductions";
  if (keep_rows) os << ";keep_rows";
  if (num_stages != 0) os << ";num_stages=" << num_stages;
  if (split_k != 0) os << ";split_k=" << split_k;
  if (max_registers != 0) os << ";maxnreg=" << max_registers;
  if (warps_m != 0) os << ";warps=" << warps_m << "x" << warps_n;
  if (!disabled_passes.empty()) {
    os << ";disabled_passes=";
    for (const std::string& p : disabled_passes) os << p << ',';
  }
  if (!enabled_passes.empty()) {
    os << ";enabled_passes=";
    for (const std::string& p : enabled_passes) os << p << ',';
  }
  return os.str();
}

}  // namespace metile
