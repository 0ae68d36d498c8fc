/** \file process.h
 * Running host tools (the cpu device's C++ compiler, metal-sim's clang) and bounding host work
 * in time. A tool is spawned directly (posix_spawn, no shell) in a process group of its own, with
 * stdin from /dev/null and stdout and stderr captured together; past its time limit the whole
 * group (the compiler driver and the cc1plus/as/ld it started) is killed.
 *
 * The limit is METILE_TIMEOUT_S (seconds; fractions allowed). It bounds each host or NVRTC
 * compile (default kDefaultCompileTimeoutS when unset) and each launch (no limit when unset; a
 * launch's own limit replaces it: cancel.h). 0 means no limit, and so does any value above
 * kLongestTimeoutS (inf too).
 */
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace metile::host {

inline constexpr double kDefaultCompileTimeoutS = 600;
/** Longer limits (about 31 years) are no limit: a deadline must fit steady_clock's range. */
inline constexpr double kLongestTimeoutS = 1e9;

/** The compile limit in seconds (0: none): METILE_TIMEOUT_S, else kDefaultCompileTimeoutS. */
double compile_timeout_s();
/** The launch limit in seconds (0: none): METILE_TIMEOUT_S, else none. */
double launch_timeout_s();

/** A private directory (mkdtemp under $TMPDIR, else /tmp), removed with its contents. */
class TempDir {
 public:
  /** `subsystem` names the device in the error when the directory cannot be made. */
  explicit TempDir(const char* subsystem);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct ProcessResult {
  bool started = false;    // false: it could not be run (see `failure`)
  bool timed_out = false;  // killed at the time limit
  int exit_status = -1;    // when it exited
  int signal = 0;          // when a signal ended it
  std::string output;      // stdout and stderr
  std::string failure;     // "" when it exited; else why not, in words
  bool ok() const { return started && failure.empty() && exit_status == 0; }
};

/** Runs `argv` (argv[0] a path, or a name looked up on PATH), killing its process group after
 * `timeout_s` seconds (0: no limit). Never throws for the tool's own failures. */
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s);

/** A host tool's run the toolchains share (the cpu compiler, xcrun): run_process with the compile
 * limit, stdout and stderr together in `*output` (or why it could not run); returns the exit
 * status, 128 + the signal that ended it, or -1 when it could not run or timed out. */
int run_command(const std::vector<std::string>& argv, std::string* output);

/** "c++ -O3 ..." for messages. */
std::string command_line(const std::vector<std::string>& argv);

/**
 * Runs `work` on a thread of its own and waits at most `timeout_s` seconds (0: no limit).
 * Returns false when it is still running then; it goes on in the background, so it must own
 * everything it touches (capture by value or shared_ptr) and must not throw.
 */
bool run_bounded(std::function<void()> work, double timeout_s);

}  // namespace metile::host
