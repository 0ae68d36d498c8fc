#include "runtime/host/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "support/env.h"
#include "support/error.h"
#include "support/log.h"

extern char** environ;

namespace metile::host {

namespace {

using Clock = std::chrono::steady_clock;

// METILE_TIMEOUT_S (0 past kLongestTimeoutS), or `fallback` when unset or not a non-negative
// number.
double timeout_from_env(double fallback) {
  std::string v = env_string("METILE_TIMEOUT_S");
  if (v.empty()) return fallback;
  char* end = nullptr;
  double s = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(s >= 0)) {
    warn_once("METILE_TIMEOUT_S", "METILE_TIMEOUT_S=\"" + v + "\" is not a number of seconds; ignored");
    return fallback;
  }
  // A deadline is now + the limit in steady_clock's int64 nanoseconds, which overflows from about
  // 9.2e9 s (inf included) into the past; a limit that long means none.
  if (s > kLongestTimeoutS) return 0;
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string seconds_text(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

}  // namespace

double compile_timeout_s() { return timeout_from_env(kDefaultCompileTimeoutS); }
double launch_timeout_s() { return timeout_from_env(0); }

TempDir::TempDir(const char* subsystem) {
  std::string base = env_string("TMPDIR", "/tmp");
  std::string tmpl = base + "/metile-" + subsystem + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    fail(METILE_ERROR_IO, subsystem, "cannot create a temporary directory in ", base, ": ",
         std::strerror(errno));
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

int run_command(const std::vector<std::string>& argv, std::string* output) {
  ProcessResult r = run_process(argv, compile_timeout_s());
  if (output) *output = r.started ? r.output : r.failure;
  if (!r.started || r.timed_out) return -1;
  return r.signal ? 128 + r.signal : r.exit_status;
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  return cmd;
}

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s) {
  ProcessResult r;
  TempDir dir("host");
  std::string log = dir.path() + "/out.txt";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A group of its own, so a timeout kills what the tool started too.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    r.failure = cat("cannot run ", argv[0], ": ", std::strerror(rc));
    return r;
  }
  r.started = true;
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(timeout_s));
  auto nap = std::chrono::microseconds(200);
  int status = 0;
  for (;;) {
    pid_t got = ::waitpid(pid, &status, timeout_s > 0 ? WNOHANG : 0);
    if (got == pid) break;
    if (got < 0 && errno != EINTR) {
      r.failure = cat("waiting for ", argv[0], ": ", std::strerror(errno));
      ::kill(-pid, SIGKILL);
      return r;
    }
    if (got == 0) {
      if (Clock::now() >= deadline) {
        ::kill(-pid, SIGKILL);
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        r.timed_out = true;
        r.failure = cat(argv[0], " did not finish within ", seconds_text(timeout_s),
                        " s (METILE_TIMEOUT_S) and was killed");
        r.output = read_file(log);
        return r;
      }
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(10000));
    }
  }
  r.output = read_file(log);
  if (WIFEXITED(status)) {
    r.exit_status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
    r.failure = cat(argv[0], " was killed by signal ", r.signal);
  }
  return r;
}

bool run_bounded(std::function<void()> work, double timeout_s) {
  if (timeout_s <= 0) {
    work();
    return true;
  }
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto state = std::make_shared<State>();
  std::thread([state, work = std::move(work)] {
    work();
    std::lock_guard<std::mutex> lock(state->mu);
    state->done = true;
    state->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(state->mu);
  return state->cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                            [&] { return state->done; });
}

}  // namespace metile::host
