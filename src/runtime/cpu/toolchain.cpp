// Finding, identifying and running the host C++ compiler (through host::run_process: no shell,
// captured output, METILE_TIMEOUT_S).
#include "runtime/cpu/toolchain.h"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "runtime/host/build_store.h"
#include "runtime/host/process.h"
#include "support/env.h"
#include "support/error.h"
#include "support/sha256.h"

namespace metile::cpu {

namespace {


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
  if (host::run_command(argv, &out) == 0) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> w = split_words(line);
      if (w.size() == 2 && w[0] == "-march=") return w[1];
    }
  }
  argv = cmd;
  argv.insert(argv.end(), {"-###", "-march=native", "-x", "c++", "-c", "/dev/null", "-o", "/dev/null"});
  if (host::run_command(argv, &out) == 0) {
    size_t at = out.find("\"-target-cpu\" \"");
    if (at != std::string::npos) {
      at += std::strlen("\"-target-cpu\" \"");
      return out.substr(at, out.find('"', at) - at);
    }
  }
  return "native";
}

// The key of the persisted probe of `cmd`: the command, the compiler executable's identity on
// disk (a reinstalled or switched compiler is probed again) and this CPU's model and features
// (-march=native differs between hosts sharing a cache directory). "" when it cannot be made.
std::string probe_record_key(const std::vector<std::string>& cmd) {
  struct stat st;
  if (::stat(cmd[0].c_str(), &st) != 0) return {};
  std::ifstream in("/proc/cpuinfo");
  std::string line, cpu;
  while (std::getline(in, line) && !line.empty()) {  // the first processor's block
    if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0 ||
        line.rfind("Features", 0) == 0 || line.rfind("CPU part", 0) == 0)
      cpu += line + "\n";
  }
  Sha256 h;
  h.update(cpu);
  return cat("cpu toolchain probe 1;", host::command_line(cmd), ";", st.st_dev, ":", st.st_ino,
             ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ";",
             to_hex(h.finish()));
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
  // Identity queries spawn the compiler; do them once per command line, and remember them in the
  // compile cache's directory so a fresh process's first (cached) kernel does not wait for them.
  static std::mutex mu;
  static std::map<std::vector<std::string>, std::pair<std::string, std::string>> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(tc.command);
  if (it == known.end()) {
    std::string record_key = probe_record_key(tc.command);
    host::BuildStore* store = host::build_store();
    auto record = record_key.empty() || !store ? std::nullopt : store->find_record(record_key);
    size_t newline = record ? record->find('\n') : std::string::npos;
    if (newline != std::string::npos) {
      it = known.emplace(tc.command, std::make_pair(record->substr(0, newline),
                                                    record->substr(newline + 1))).first;
    } else {
      std::string out;
      std::vector<std::string> argv = tc.command;
      argv.push_back("--version");
      std::string version = host::run_command(argv, &out) == 0 ? first_line(out) : "";
      std::string target = resolve_native(tc.command);
      if (store && !record_key.empty() && !version.empty() &&
          version.find('\n') == std::string::npos)
        store->store_record(record_key, version + "\n" + target);
      it = known.emplace(tc.command, std::make_pair(version, target)).first;
    }
  }
  tc.version = it->second.first;
  tc.target = it->second.second;
  return tc;
}

std::vector<uint8_t> compile_shared_object(const Toolchain& tc, const std::string& source,
                                           const std::string& kernel_name) {
  host::TempDir dir("cpu");
  std::string src = dir.path() + "/kernel.cpp", so = dir.path() + "/kernel.so";
  {
    std::ofstream out(src, std::ios::binary);
    out << source;
    if (!out) fail(METILE_ERROR_IO, "cpu", "cannot write ", src);
  }
  std::vector<std::string> argv = tc.command;
  argv.insert(argv.end(), tc.flags.begin(), tc.flags.end());
  argv.insert(argv.end(), {"-o", so, src, "-lm"});
  double limit = host::compile_timeout_s();
  host::ProcessResult r = host::run_process(argv, limit);
  std::string bytes = r.ok() ? read_file(so) : std::string();
  if (!r.ok() || bytes.empty()) {
    std::string log = r.output;
    const size_t kMaxLog = 4096;
    if (log.size() > kMaxLog) log = log.substr(0, kMaxLog) + "\n[... log truncated]";
    std::string how = r.timed_out ? "timed out: " + r.failure
                      : !r.failure.empty() ? r.failure
                                           : cat("exit status ", r.exit_status);
    fail(METILE_ERROR_COMPILE, "cpu", "compiling kernel ", kernel_name, " failed (", how,
         ")\ncommand: ", host::command_line(argv), "\n",
         log.empty() ? "(the compiler printed nothing)" : log);
  }
  return {bytes.begin(), bytes.end()};
}

}  // namespace metile::cpu
