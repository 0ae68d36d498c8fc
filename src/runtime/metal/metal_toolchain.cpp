#include "runtime/metal/metal_toolchain.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>

#include "runtime/host/process.h"
#include "support/env.h"
#include "support/error.h"

namespace metile::metal {

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

const MetalToolchain& metal_toolchain() {
  static std::once_flag once;
  static MetalToolchain tc;
  std::call_once(once, [] {
    std::string xcrun = env_string("METILE_XCRUN", "xcrun");
    std::string out;
    // Both tools must be found; `--find` fails fast where Xcode's command-line tools are absent.
    try {
      if (host::run_command({xcrun, "-sdk", "macosx", "--find", "metal"}, &out) != 0) return;
      if (host::run_command({xcrun, "-sdk", "macosx", "--find", "metallib"}, &out) != 0) return;
      if (host::run_command({xcrun, "-sdk", "macosx", "metal", "--version"}, &out) != 0) return;
    } catch (const Error&) {
      return;  // xcrun cannot be run at all
    }
    tc.xcrun = xcrun;
    tc.version = first_line(out);
  });
  return tc;
}

TempFile::TempFile(const std::string& suffix, const void* bytes, size_t size) {
  path_ = (std::filesystem::temp_directory_path() / ("metile-metal-XXXXXX" + suffix)).string();
  int fd = mkstemps(path_.data(), static_cast<int>(suffix.size()));
  if (fd < 0) fail(METILE_ERROR_IO, "metal", "cannot create ", path_, ": ", std::strerror(errno));
  bool ok = write(fd, bytes, size) == static_cast<ssize_t>(size);
  int err = errno;
  close(fd);
  if (!ok) {
    unlink(path_.c_str());
    fail(METILE_ERROR_IO, "metal", "cannot write ", path_, ": ", std::strerror(err));
  }
}

TempFile::~TempFile() { unlink(path_.c_str()); }

std::vector<uint8_t> build_metallib(const MetalToolchain& tc, const std::string& msl,
                                    const std::string& kernel_name, const std::string& language) {
  TempFile source(".metal", msl.data(), msl.size());
  std::string air = source.path() + ".air", lib = source.path() + ".metallib";
  std::string log;
  // Fast math stays off: the kernels must mean what docs/semantics.md says (NaN, inf, rounding).
  std::vector<std::string> compile = {tc.xcrun, "-sdk", "macosx", "metal", "-O2", "-fno-fast-math"};
  if (!language.empty()) compile.push_back("-std=" + language);
  for (const std::string& a : {std::string("-c"), source.path(), std::string("-o"), air}) compile.push_back(a);
  int rc = host::run_command(compile, &log);
  if (rc == 0) rc = host::run_command({tc.xcrun, "-sdk", "macosx", "metallib", air, "-o", lib}, &log);
  std::vector<uint8_t> bytes;
  if (rc == 0) {
    std::ifstream in(lib, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  unlink(air.c_str());
  unlink(lib.c_str());
  if (rc != 0)
    fail(METILE_ERROR_COMPILE, "metal", kernel_name, ": the Metal compiler failed:\n", log);
  if (bytes.empty())
    fail(METILE_ERROR_COMPILE, "metal", kernel_name, ": metallib wrote no library");
  return bytes;
}

}  // namespace metile::metal
