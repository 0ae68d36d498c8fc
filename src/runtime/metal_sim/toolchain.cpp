#include "runtime/metal_sim/toolchain.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/env.h"
#include "support/error.h"

extern char** environ;

namespace metile::metal_sim {

namespace {

namespace fs = std::filesystem;

/** A temporary directory, removed with everything in it. */
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "metile-msl-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      fail(METILE_ERROR_IO, "metal-sim", "cannot create a temporary directory in ",
           fs::temp_directory_path().string(), ": ", std::strerror(errno));
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_file(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) fail(METILE_ERROR_IO, "metal-sim", "cannot write ", path.string());
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

/**
 * Runs argv[0] (looked up on PATH) with stdout and stderr going to `log_path`. Returns the exit
 * status, or -1 with `why` set when the program could not be started or was killed.
 */
int run_process(const std::vector<std::string>& argv, const fs::path& log_path, std::string* why) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    *why = cat("cannot run ", argv[0], ": ", std::strerror(rc));
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      *why = cat("waiting for ", argv[0], ": ", std::strerror(errno));
      return -1;
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  *why = cat(argv[0], " was killed by signal ", WTERMSIG(status));
  return -1;
}

bool on_path(const std::string& name) {
  std::string path = env_string("PATH");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (!dir.empty() && access((fs::path(dir) / name).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

ClangProbe probe_clang_command(const std::string& command) {
  ClangProbe p;
  p.clang.command = command;
  TempDir dir;
  std::string why;
  int rc = run_process({command, "--version"}, dir.path() / "version.txt", &why);
  std::string out = read_file(dir.path() / "version.txt");
  if (rc != 0) {
    p.unavailable = rc < 0 ? why : cat(command, " --version failed: ", out);
    return p;
  }
  p.clang.version = out.substr(0, out.find('\n'));
  std::smatch m;
  if (!std::regex_search(p.clang.version, m, std::regex(R"(clang version (\d+)\.)"))) {
    p.unavailable = cat(command, " is not clang (its --version says \"", p.clang.version, "\")");
    return p;
  }
  p.clang.major = std::stoi(m[1].str());
  if (p.clang.major < kMinClangMajor)
    p.unavailable =
        cat(command, " is clang ", p.clang.major, "; metal-sim needs clang >= ", kMinClangMajor,
            " (set METILE_CLANG to a newer one)");
  return p;
}

const ClangProbe& probe_clang() {
  static const ClangProbe probe = [] {
    std::string chosen = env_string("METILE_CLANG");
    if (!chosen.empty()) {
      ClangProbe p = probe_clang_command(chosen);
      if (!p.unavailable.empty()) p.unavailable = "METILE_CLANG=" + chosen + ": " + p.unavailable;
      return p;
    }
    // Distributions install versioned names; prefer the newest.
    std::vector<std::string> candidates;
    for (int v = 30; v >= kMinClangMajor; --v) candidates.push_back(cat("clang++-", v));
    candidates.push_back("clang++");
    std::string reasons;
    for (const std::string& c : candidates) {
      if (!on_path(c)) continue;
      ClangProbe p = probe_clang_command(c);
      if (p.unavailable.empty()) return p;
      reasons += "; " + p.unavailable;
    }
    ClangProbe none;
    none.unavailable =
        cat("no clang >= ", kMinClangMajor,
            " found (tried $METILE_CLANG, clang++-N and clang++ on PATH", reasons, ")");
    return none;
  }();
  return probe;
}

ClangRun run_clang(const Clang& clang, std::string_view source, std::string_view source_name,
                   const std::vector<std::pair<std::string, std::string_view>>& include_files,
                   bool shared_object) {
  TempDir dir;
  for (const auto& [name, text] : include_files) write_file(dir.path() / name, text);
  fs::path src = dir.path() / std::string(source_name);
  write_file(src, source);
  fs::path out = dir.path() / "kernel.so";
  std::vector<std::string> argv = {clang.command,
                                   "-x",
                                   "c++",
                                   "-std=c++17",
                                   "-O2",
                                   "-fPIC",
                                   "-Werror",
                                   "-fvisibility=hidden",
                                   "-fno-exceptions",
                                   "-fno-rtti",
                                   "-I",
                                   dir.path().string(),
                                   "-include",
                                   "metal_shim.h",
                                   src.string()};
  if (shared_object) {
    // Reports the frames over 16 KiB (as warnings): build_msl sizes the fiber stacks from them.
    argv.insert(argv.end(), {"-shared", "-o", out.string(), "-Wframe-larger-than=16384",
                             "-Wno-error=frame-larger-than"});
  } else {
    argv.push_back("-fsyntax-only");
  }
  std::string why;
  int rc = run_process(argv, dir.path() / "clang.log", &why);
  if (rc < 0) fail(METILE_ERROR_COMPILE, "metal-sim", why);
  ClangRun run;
  run.log = read_file(dir.path() / "clang.log");
  run.ok = rc == 0;
  if (run.ok && shared_object) {
    std::string bytes = read_file(out);
    run.output.assign(bytes.begin(), bytes.end());
  }
  return run;
}

}  // namespace metile::metal_sim
