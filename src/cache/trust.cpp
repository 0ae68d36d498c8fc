#include "cache/trust.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cache/files.h"
#include "support/error.h"

namespace metile {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

bool fill_random(uint8_t* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::getrandom(data + done, size - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads the secret; ENOENT is returned as "" with nullopt so the caller may create it.
std::optional<MacKey> read_secret(const std::string& path, std::string* why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *why = errno == ENOENT ? "" : cat("cannot open ", path, ": ", errno_text(errno));
    return std::nullopt;
  }
  std::optional<MacKey> key;
  struct stat st;
  MacKey k{};
  if (::fstat(fd, &st) != 0) {
    *why = cat("cannot stat ", path, ": ", errno_text(errno));
  } else if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    *why = cat(path, " is not a regular file that only its owner (this user) can read");
  } else if (st.st_size != static_cast<off_t>(k.size()) ||
             ::read(fd, k.data(), k.size()) != static_cast<ssize_t>(k.size())) {
    *why = cat(path, " is not a ", k.size(), "-byte secret");
  } else {
    key = k;
  }
  ::close(fd);
  return key;
}

}  // namespace

std::string untrusted_dir_reason(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return cat("cannot stat it: ", errno_text(errno));
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != ::geteuid())
    return cat("it belongs to uid ", st.st_uid, ", not to this user (uid ", ::geteuid(), ")");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) return "it is writable by group or others";
  return {};
}

std::optional<MacKey> cache_secret(const std::string& dir, bool create, std::string* why) {
  std::string path = dir + "/" + kCacheSecretName;
  auto key = read_secret(path, why);
  if (key || !why->empty() || !create) {
    if (!key && why->empty()) *why = cat(path, " does not exist");
    return key;
  }
  // Written completely under a private name, then linked into place: link() fails when another
  // process got there first, and both then use the one that won.
  MacKey fresh{};
  if (!fill_random(fresh.data(), fresh.size())) {
    *why = cat("cannot get random bytes: ", errno_text(errno));
    return std::nullopt;
  }
  std::string tmp = cat(dir, "/.", kCacheSecretName, ".", ::getpid(), ".", ::gettid(), ".tmp");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = cat("cannot create ", tmp, ": ", errno_text(errno));
    return std::nullopt;
  }
  bool written = ::write(fd, fresh.data(), fresh.size()) == static_cast<ssize_t>(fresh.size());
  int err = errno;
  ::close(fd);
  int linked = written ? ::link(tmp.c_str(), path.c_str()) : -1;
  if (linked != 0 && written) err = errno;
  ::unlink(tmp.c_str());
  if (!written || (linked != 0 && err != EEXIST)) {
    *why = cat("cannot write ", path, ": ", errno_text(err));
    return std::nullopt;
  }
  return read_secret(path, why);
}

}  // namespace metile
