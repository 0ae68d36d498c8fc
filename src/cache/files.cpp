#include "cache/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <random>

namespace metile {

namespace {

constexpr size_t kChunk = 64 * 1024;
constexpr const char* kTempSuffix = ".tmp";

int64_t mtime_ns(const struct stat& st) {
#if defined(__APPLE__)
  return int64_t{st.st_mtimespec.tv_sec} * 1000000000 + st.st_mtimespec.tv_nsec;
#else
  return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
#endif
}

int fault(const WriteFaultHook& hook, const char* step, uint64_t offset) {
  return hook ? hook(step, offset) : 0;
}

}  // namespace

int make_dirs(const std::string& dir) {
  if (dir.empty()) return 0;
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    if (int rc = make_dirs(dir.substr(0, slash))) return rc;
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errno;
  return 0;
}

namespace {

// pid + per-process random + counter: unique across processes and threads, and across pid reuse
// in containers where several hosts share the cache directory.
std::string temp_path_for(const std::string& path) {
  static const uint64_t salt =
      std::random_device{}() * 0x9e3779b97f4a7c15ull ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + base + "." + std::to_string(::getpid()) + "." + std::to_string(salt) + "." +
         std::to_string(counter.fetch_add(1)) + kTempSuffix;
}

int write_all(int fd, std::span<const uint8_t> data, const WriteFaultHook& hook) {
  size_t done = 0;
  while (done < data.size()) {
    if (int rc = fault(hook, "write", done)) return rc;
    ssize_t n = ::write(fd, data.data() + done, std::min(kChunk, data.size() - done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

std::optional<std::vector<uint8_t>> read_whole_file(const std::string& path, uint64_t max_bytes) {
  // Not a symlink's target, and never blocking on a FIFO or a device planted under the name.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::vector<uint8_t>> out;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) <= max_bytes) {
    std::vector<uint8_t> data(static_cast<size_t>(st.st_size));
    size_t done = 0;
    bool ok = true;
    while (done < data.size()) {
      ssize_t n = ::read(fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok = false;
        break;
      }
      done += static_cast<size_t>(n);
    }
    if (ok) out = std::move(data);
  }
  ::close(fd);
  return out;
}

int publish_file(const std::string& path, std::span<const uint8_t> data,
                 const WriteFaultHook& hook) {
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos) {
    if (int rc = fault(hook, "mkdir", 0)) return rc;
    if (int rc = make_dirs(path.substr(0, slash))) return rc;
  }
  std::string tmp = temp_path_for(path);
  if (int rc = fault(hook, "open", 0)) return rc;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  int rc = write_all(fd, data, hook);
  if (::close(fd) != 0 && rc == 0) rc = errno;
  if (rc == 0) rc = fault(hook, "rename", 0);
  if (rc == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) rc = errno;
  if (rc != 0) ::unlink(tmp.c_str());
  return rc;
}

bool is_temp_name(const std::string& name) {
  return name.size() > 5 && name[0] == '.' && name.ends_with(kTempSuffix);
}

std::vector<FileInfo> list_files(const std::string& dir,
                                 const std::function<bool(const std::string&)>& keep) {
  std::vector<FileInfo> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (!keep(name)) continue;
    std::string path = dir + "/" + name;
    struct stat st;
    // A racing process may have removed or replaced it since readdir; skip it then.
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({path, static_cast<uint64_t>(st.st_size), mtime_ns(st)});
  }
  ::closedir(d);
  return out;
}

std::vector<std::string> list_dirs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::lstat((dir + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) out.push_back(name);
  }
  ::closedir(d);
  return out;
}

}  // namespace metile
