// Finding, identifying and running the host C++ compiler. Commands are spawned directly
// (posix_spawn, no shell), with output captured through a file in a private temp directory.
#include "runtime/cpu/toolchain.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "support/env.h"
#include "support/error.h"

extern char** environ;

namespace metile::cpu {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

bool executable(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The full path of `name` (as a shell would find it), or "".
std::string which(const std::string& name) {
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  std::string path = env_string("PATH", "/usr/local/bin:/usr/bin:/bin");
  std::istringstream in(path);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (executable(candidate)) return candidate;
  }
  return "";
}

// The compiler command, or the reason there is none.
std::vector<std::string> find_command(std::string* why) {
  std::string env = env_string("METILE_CXX");
  if (!env.empty()) {
    std::vector<std::string> words = split_words(env);
    std::string exe = words.empty() ? "" : which(words[0]);
    if (exe.empty()) {
      *why = "METILE_CXX=\"" + env + "\" does not name an executable compiler";
      return {};
    }
    words[0] = exe;
    return words;
  }
  for (const char* name : {"c++", "clang++", "g++"}) {
    std::string exe = which(name);
    if (!exe.empty()) return {exe};
  }
  *why = "no C++ compiler found: install g++ or clang++, or set METILE_CXX to one";
  return {};
}

class TempDir {
 public:
  TempDir() {
    std::string base = env_string("TMPDIR", "/tmp");
    std::string tmpl = base + "/metile-cpu-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr)
      fail(METILE_ERROR_IO, "cpu", "cannot create a temporary directory in ", base, ": ",
           std::strerror(errno));
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string first_line(const std::string& s) {
  size_t end = s.find('\n');
  return s.substr(0, end == std::string::npos ? s.size() : end);
}

// What -march=native means to this compiler: GCC answers -Q --help=target, Clang prints its
// -target-cpu in a -### dry run.
std::string resolve_native(const std::vector<std::string>& cmd) {
  std::string out;
  std::vector<std::string> argv = cmd;
  argv.insert(argv.end(), {"-march=native", "-Q", "--help=target"});
  if (run_command(argv, &out) == 0) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> w = split_words(line);
      if (w.size() == 2 && w[0] == "-march=") return w[1];
    }
  }
  argv = cmd;
  argv.insert(argv.end(), {"-###", "-march=native", "-x", "c++", "-c", "/dev/null", "-o", "/dev/null"});
  if (run_command(argv, &out) == 0) {
    size_t at = out.find("\"-target-cpu\" \"");
    if (at != std::string::npos) {
      at += std::strlen("\"-target-cpu\" \"");
      return out.substr(at, out.find('"', at) - at);
    }
  }
  return "native";
}

std::string machine() {
  struct utsname u;
  return ::uname(&u) == 0 ? u.machine : "unknown";
}

}  // namespace

const std::vector<std::string>& kernel_flags() {
  // No fast-math: results must match the interp device. -fno-math-errno and
  // -fno-trapping-math change no result, but let sqrt and masked loops vectorize;
  // -ffp-contract=off keeps a*b+c rounded twice, as everywhere else.
  static const std::vector<std::string> flags = {
      "-O3", "-march=native", "-fPIC", "-shared", "-std=c++17", "-fopenmp-simd",
      "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-w"};
  return flags;
}

int run_command(const std::vector<std::string>& argv, std::string* output) {
  TempDir dir;
  std::string log = dir.path() + "/out.txt";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    if (output) *output = std::string("cannot run ") + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (output) *output = read_file(log);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string Toolchain::identity() const {
  std::string s = "cpu;" + machine() + ";" + target + ";" + command[0] + ";" + version + ";";
  for (size_t i = 1; i < command.size(); ++i) s += command[i] + " ";
  for (const std::string& f : flags) s += f + " ";
  return s;
}

std::string probe_compiler() {
  std::string why;
  find_command(&why);
  return why;
}

Toolchain current_toolchain() {
  std::string why;
  Toolchain tc;
  tc.command = find_command(&why);
  if (tc.command.empty()) fail(METILE_ERROR_DEVICE_UNAVAILABLE, "cpu", why);
  tc.flags = kernel_flags();
  // Identity queries spawn the compiler; do them once per command line.
  static std::mutex mu;
  static std::map<std::vector<std::string>, std::pair<std::string, std::string>> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(tc.command);
  if (it == known.end()) {
    std::string out;
    std::vector<std::string> argv = tc.command;
    argv.push_back("--version");
    std::string version = run_command(argv, &out) == 0 ? first_line(out) : "";
    it = known.emplace(tc.command, std::make_pair(version, resolve_native(tc.command))).first;
  }
  tc.version = it->second.first;
  tc.target = it->second.second;
  return tc;
}

std::vector<uint8_t> compile_shared_object(const Toolchain& tc, const std::string& source,
                                           const std::string& kernel_name) {
  TempDir dir;
  std::string src = dir.path() + "/kernel.cpp", so = dir.path() + "/kernel.so";
  {
    std::ofstream out(src, std::ios::binary);
    out << source;
    if (!out) fail(METILE_ERROR_IO, "cpu", "cannot write ", src);
  }
  std::vector<std::string> argv = tc.command;
  argv.insert(argv.end(), tc.flags.begin(), tc.flags.end());
  argv.insert(argv.end(), {"-o", so, src, "-lm"});
  std::string log;
  int rc = run_command(argv, &log);
  std::string bytes = rc == 0 ? read_file(so) : std::string();
  if (rc != 0 || bytes.empty()) {
    std::string cmd;
    for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    const size_t kMaxLog = 4096;
    if (log.size() > kMaxLog) log = log.substr(0, kMaxLog) + "\n[... log truncated]";
    fail(METILE_ERROR_COMPILE, "cpu", "compiling kernel ", kernel_name, " failed (exit status ",
         rc, ")\ncommand: ", cmd, "\n", log.empty() ? "(the compiler printed nothing)" : log);
  }
  return {bytes.begin(), bytes.end()};
}

}  // namespace metile::cpu
