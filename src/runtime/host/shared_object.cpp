#include "runtime/host/shared_object.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

#include "support/env.h"
#include "support/error.h"

namespace metile::host {

namespace {

// Path names of the libraries this process loaded and has not fully unloaded. Guarded by mu(),
// which is also held across dlopen and dlclose so a name is never chosen while it is in flux.
std::mutex& mu() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::set<std::string>& names_in_use() {
  static std::set<std::string>* s = new std::set<std::string>();
  return *s;
}

bool write_all(int fd, const std::vector<uint8_t>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// True while a library loaded under `name` is still mapped (dlclose may keep one, e.g. for
// STB_GNU_UNIQUE symbols). Walks the loaded objects; never opens the path.
bool still_loaded(const std::string& name) {
  struct Search {
    const std::string* name;
    bool found;
  } search{&name, false};
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name != nullptr && *s->name == info->dlpi_name) s->found = true;
        return s->found ? 1 : 0;
      },
      &search);
  return search.found;
}

}  // namespace

SharedObject::SharedObject(const std::vector<uint8_t>& bytes, const char* subsystem,
                           const std::string& label)
    : subsystem_(subsystem), label_(label) {
  std::string error;
  std::lock_guard<std::mutex> lock(mu());
  int fd = ::memfd_create(("metile-" + label).c_str(), MFD_CLOEXEC);
  if (fd >= 0 && write_all(fd, bytes)) {
    // The fd's number names the library, and dlopen hands out an already loaded library of the
    // same name; duplicate it onto a number no loaded library uses: none this loader loaded, and
    // none another copy of it (the Metal stand-in links its own) or anyone else left mapped.
    std::vector<int> fds{fd};
    auto taken = [](const std::string& path) {
      return names_in_use().count(path) != 0 || still_loaded(path);
    };
    while (taken(fd_path(fds.back()))) {
      int next = ::fcntl(fd, F_DUPFD_CLOEXEC, fds.back() + 1);
      if (next < 0) break;
      fds.push_back(next);
    }
    std::string path = fd_path(fds.back());
    if (!taken(path)) {
      handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle_ == nullptr) error = ::dlerror();
      else name_ = path;
    }
    for (int f : fds) ::close(f);  // the mapping keeps the code; no descriptor stays open
  } else if (fd >= 0) {
    ::close(fd);
  }
  if (handle_ == nullptr) {
    // Without memfd (or with /proc unavailable): a private temporary file, unlinked once mapped.
    for (int attempt = 0; attempt < 8 && handle_ == nullptr; ++attempt) {
      std::string tmpl = env_string("TMPDIR", "/tmp") + "/metile-kernel-XXXXXX.so";
      std::vector<char> buf(tmpl.begin(), tmpl.end());
      buf.push_back('\0');
      int tfd = ::mkstemps(buf.data(), 3);
      if (tfd < 0)
        fail(METILE_ERROR_IO, subsystem_, "cannot create a file to load kernel ", label, ": ",
             std::strerror(errno));
      std::string path = buf.data();
      bool ok = write_all(tfd, bytes);
      ::close(tfd);
      bool name_taken = ok && names_in_use().count(path) != 0;  // then try another name
      if (ok && !name_taken) {
        handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle_ == nullptr) error += std::string(error.empty() ? "" : "; ") + ::dlerror();
        else name_ = path;
      } else if (!ok) {
        error += std::string(error.empty() ? "" : "; ") + "write failed: " + std::strerror(errno);
      }
      ::unlink(path.c_str());
      if (!name_taken) break;
    }
  }
  if (handle_ == nullptr)
    fail(METILE_ERROR_DEVICE, subsystem_, "cannot load the compiled kernel ", label, ": ", error);
  names_in_use().insert(name_);
}

SharedObject::~SharedObject() {
  std::lock_guard<std::mutex> lock(mu());
  ::dlclose(handle_);
  // A library that stays mapped keeps its name: dlopen would hand it out for the name again.
  if (!still_loaded(name_)) names_in_use().erase(name_);
}

void* SharedObject::find(const char* name) const { return ::dlsym(handle_, name); }

void* SharedObject::symbol(const char* name) const {
  void* s = find(name);
  if (s == nullptr)
    fail(METILE_ERROR_DEVICE, subsystem_, "kernel ", label_, " has no symbol ", name,
         " (a corrupt or foreign artifact?)");
  return s;
}

}  // namespace metile::host
