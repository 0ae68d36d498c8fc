/** \file files.h
 * The file-system side of the cache: whole-file reads, atomic publication (temp file in the same
 * directory + rename, so a reader sees either the old entry or the complete new one, never a
 * torn file) and listing. There is no fsync: readers verify every entry, so a file torn by a
 * crash reads as a miss, never as a wrong kernel, and compiles do not wait for the disk.
 * Failures are returned as errno values, because to the cache a failed write means "continue
 * without the disk", not an error.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace metile {

/**
 * Test hook for simulating a read-only or full disk: called before each step of a publication
 * ("mkdir", "open", "write" with the byte offset about to be written, "rename"); a non-zero return
 * is taken as that step failing with that errno.
 */
using WriteFaultHook = std::function<int(const char* step, uint64_t offset)>;

/** The largest file read_whole_file reads by default. */
inline constexpr uint64_t kMaxReadBytes = uint64_t{256} << 20;

/** The whole file; nullopt when it cannot be opened or read, is a symlink, is not a regular file
 * (a FIFO must not block the reader) or is larger than `max_bytes`. */
std::optional<std::vector<uint8_t>> read_whole_file(const std::string& path,
                                                    uint64_t max_bytes = kMaxReadBytes);

/** mkdir -p, new directories private to the user (0700); EEXIST from a racing process is
 * success. Returns 0 or the errno. */
int make_dirs(const std::string& dir);

/**
 * Creates `path`'s directory if needed, writes `data` to a unique temp file beside `path` and
 * renames it over `path`. Returns 0, or the errno of the step that failed; the temp file never
 * survives a failure.
 */
int publish_file(const std::string& path, std::span<const uint8_t> data,
                 const WriteFaultHook& hook = {});

/** True for the names publish_file gives its temp files. */
bool is_temp_name(const std::string& name);

struct FileInfo {
  std::string path;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

/**
 * Regular files directly inside `dir` (not recursive) for which `keep(name)` is true; missing or
 * unreadable directories give an empty list.
 */
std::vector<FileInfo> list_files(const std::string& dir,
                                 const std::function<bool(const std::string&)>& keep);

/** Subdirectory names of `dir`. */
std::vector<std::string> list_dirs(const std::string& dir);

}  // namespace metile
