/** \file cancel_words.h
 * The stop words GPU kernels check at loop back-edges (docs/semantics.md, "Stopping a launch"):
 * host memory a GPU device maps into the GPU's address space and passes to each kernel. The host
 * writes kWordStop into a word to stop the kernels reading it (cuda's read a copy in GPU memory,
 * which its device keeps in step); a kernel that stops writes kWordStopped back, so the host can
 * tell a stopped launch from a failed one. cancel_launches()
 * (cancel.h) sets every word in use, from a signal handler too: the words live in static storage
 * that is never freed, and taking, setting and scanning them are lock-free atomics.
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace metile::host {

inline constexpr uint32_t kWordRun = 0, kWordStop = 1, kWordStopped = 2;

/** One block of words, owned by one device. */
class CancelWords {
 public:
  /** A page on every host (Apple's are 16 KiB), so a device can map it without a copy. */
  static constexpr size_t kBytes = 16384;
  static constexpr int kCount = static_cast<int>(kBytes / sizeof(uint32_t));

  /** Takes a block of the process's; METILE_ERROR_DEVICE when all are in use. */
  CancelWords();
  ~CancelWords();
  CancelWords(const CancelWords&) = delete;
  CancelWords& operator=(const CancelWords&) = delete;

  /** The block: kBytes, aligned to kBytes. */
  void* memory() const;
  /** A free word, set to kWordRun and in use (cancel_launches sets it) until released; -1 when
   * every word is in use. */
  int take();
  void release(int word);
  uint32_t get(int word) const;
  /** Asks the kernels reading `word` to stop. */
  void stop(int word);
  static uint64_t offset(int word) { return static_cast<uint64_t>(word) * sizeof(uint32_t); }

 private:
  int block_;
};

/** Sets every word in use to kWordStop. Async-signal-safe; called by cancel_launches(). */
void stop_words_in_use();

/**
 * The read end of a pipe that gets a byte each time stop_words_in_use() ran. A device whose
 * kernels read a copy of the words (cuda's, in GPU memory) waits on it in a thread of its own
 * and copies the stops over: stop_words_in_use() may run in a signal handler, which can make no
 * driver call. Made at the first call (not from a signal handler); -1 when no pipe could be made.
 */
int stop_notice_fd();

}  // namespace metile::host
