#include "runtime/metal_sim/toolchain.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "runtime/host/process.h"
#include "support/env.h"
#include "support/error.h"

namespace metile::metal_sim {

namespace {

namespace fs = std::filesystem;

std::atomic<uint64_t> g_clang_runs{0};

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
  host::ProcessResult r = host::run_process({command, "--version"}, host::compile_timeout_s());
  std::string out = r.output;
  if (!r.ok()) {
    p.unavailable = !r.failure.empty() ? r.failure : cat(command, " --version failed: ", out);
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

uint64_t clang_runs() { return g_clang_runs.load(std::memory_order_relaxed); }

int opt_level() {
  std::string v = env_string("METILE_METAL_SIM_OPT");
  if (v.empty()) return 2;
  if (v.size() != 1 || v[0] < '0' || v[0] > '3')
    fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", "METILE_METAL_SIM_OPT is \"", v,
         "\"; expected an optimization level from 0 to 3");
  return v[0] - '0';
}

ClangRun run_clang(const Clang& clang, std::string_view source, std::string_view source_name,
                   const std::vector<std::pair<std::string, std::string_view>>& include_files,
                   bool shared_object) {
  host::TempDir tmp("metal-sim");
  fs::path dir_path = tmp.path();
  for (const auto& [name, text] : include_files) {
    fs::path at = dir_path / name;
    if (at.has_parent_path()) fs::create_directories(at.parent_path());  // Framework/Header.h
    write_file(at, text);
  }
  fs::path src = dir_path / std::string(source_name);
  write_file(src, source);
  fs::path out = dir_path / "kernel.so";
  std::vector<std::string> argv = {clang.command,
                                   "-x",
                                   "c++",
                                   "-std=c++20",  // class-type template parameters (matmul2d<descriptor, scope>)
                                   cat("-O", opt_level()),
                                   "-fPIC",
                                   "-Werror",
                                   // An unroll hint the optimizer cannot honour (a very long
                                   // body) is a performance note, as on Apple's compiler.
                                   "-Wno-pass-failed",
                                   "-fvisibility=hidden",
                                   "-fno-exceptions",
                                   "-fno-rtti",
                                   "-I",
                                   dir_path.string(),
                                   "-include",
                                   "metal_shim.h",
                                   src.string()};
  if (shared_object) {
    // Reports the frames over 16 KiB (as warnings): build_msl sizes the fiber stacks from them.
    argv.insert(argv.end(), {"-shared", "-o", out.string(), "-Wframe-larger-than=16384",
                             "-Wno-error=frame-larger-than",
                             // The shim needs libc and libm only; not linking libstdc++ takes
                             // a quarter off a small kernel's build (the linker reads its symbols).
                             "-nostdlib++"});
  } else {
    argv.push_back("-fsyntax-only");
  }
  g_clang_runs.fetch_add(1, std::memory_order_relaxed);
  host::ProcessResult r = host::run_process(argv, host::compile_timeout_s());
  if (!r.started || r.timed_out || r.signal != 0)
    fail(METILE_ERROR_COMPILE, "metal-sim", r.timed_out ? "timed out: " : "", r.failure,
         "\ncommand: ", host::command_line(argv), r.output.empty() ? "" : "\n",
         r.output.substr(0, 4096));
  ClangRun run;
  run.log = r.output;
  run.ok = r.exit_status == 0;
  if (run.ok && shared_object) {
    std::string bytes = read_file(out);
    run.output.assign(bytes.begin(), bytes.end());
  }
  return run;
}

}  // namespace metile::metal_sim
