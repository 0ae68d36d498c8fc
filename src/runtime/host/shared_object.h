/** \file shared_object.h
 * A shared object loaded from bytes, for the devices that compile kernels into host code (cpu,
 * metal-sim). It is loaded from a memfd (else a private temporary file) that is closed as soon as
 * the library is mapped, so a loaded kernel holds no file descriptor, and unloaded when the
 * object is destroyed.
 *
 * dlopen() identifies libraries by path name and returns an already-loaded library whose name
 * matches, so a name ("/proc/self/fd/7") must never be reused while a library loaded under it is
 * still mapped: the names in use are recorded process-wide and a new library avoids them.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace metile::host {

class SharedObject {
 public:
  /** Loads `bytes`; `subsystem` and `label` (the kernel's name) go into error messages. Throws
   * METILE_ERROR_DEVICE when the library does not load, METILE_ERROR_IO when no file can hold it. */
  SharedObject(const std::vector<uint8_t>& bytes, const char* subsystem, const std::string& label);
  ~SharedObject();
  SharedObject(const SharedObject&) = delete;
  SharedObject& operator=(const SharedObject&) = delete;

  /** The symbol's address, or nullptr. */
  void* find(const char* name) const;
  /** The symbol's address; throws METILE_ERROR_DEVICE when it is missing. */
  void* symbol(const char* name) const;

 private:
  void* handle_ = nullptr;
  std::string name_;  // the path it was loaded under
  const char* subsystem_;
  std::string label_;
};

}  // namespace metile::host
