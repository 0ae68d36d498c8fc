// The stop words GPU kernels check (cancel_words.h).
#include "runtime/host/cancel_words.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>

#include "support/error.h"

namespace metile::host {

namespace {

// Enough blocks for every GPU a process opens; untouched blocks cost no memory.
constexpr int kBlocks = 16;

struct alignas(CancelWords::kBytes) Block {
  std::atomic<uint32_t> words[CancelWords::kCount];
};
static_assert(sizeof(Block) == CancelWords::kBytes && std::atomic<uint32_t>::is_always_lock_free);

Block g_blocks[kBlocks];
std::atomic<uint8_t> g_in_use[kBlocks][CancelWords::kCount];
std::atomic<bool> g_block_taken[kBlocks];
std::atomic<int> g_notice_write{-1};  // stop_notice_fd()'s pipe; -1 until it is made

}  // namespace

CancelWords::CancelWords() : block_(-1) {
  for (int b = 0; b < kBlocks && block_ < 0; ++b)
    if (!g_block_taken[b].exchange(true)) block_ = b;
  if (block_ < 0)
    fail(METILE_ERROR_DEVICE, "launch", "more than ", kBlocks,
         " GPU devices are open at once: no stop words are left for another");
}

CancelWords::~CancelWords() {
  for (int i = 0; i < kCount; ++i) release(i);
  g_block_taken[block_].store(false);
}

void* CancelWords::memory() const { return &g_blocks[block_]; }

int CancelWords::take() {
  for (int i = 0; i < kCount; ++i) {
    uint8_t free = 0;
    if (g_in_use[block_][i].load(std::memory_order_relaxed) != 0 ||
        !g_in_use[block_][i].compare_exchange_strong(free, 1))
      continue;
    g_blocks[block_].words[i].store(kWordRun);
    return i;
  }
  return -1;
}

void CancelWords::release(int word) { g_in_use[block_][word].store(0); }

uint32_t CancelWords::get(int word) const { return g_blocks[block_].words[word].load(); }

void CancelWords::stop(int word) {
  uint32_t run = kWordRun;  // a kernel's kWordStopped stays
  g_blocks[block_].words[word].compare_exchange_strong(run, kWordStop);
}

void stop_words_in_use() {
  for (int b = 0; b < kBlocks; ++b) {
    if (!g_block_taken[b].load(std::memory_order_relaxed)) continue;
    for (int i = 0; i < CancelWords::kCount; ++i) {
      if (g_in_use[b][i].load(std::memory_order_relaxed) == 0) continue;
      uint32_t run = kWordRun;
      g_blocks[b].words[i].compare_exchange_strong(run, kWordStop);
    }
  }
  // write() is async-signal-safe; the end is non-blocking, and a full pipe already holds a
  // notice its reader has yet to see.
  if (int fd = g_notice_write.load(); fd >= 0) {
    const char notice = 1;
    [[maybe_unused]] ssize_t n = write(fd, &notice, 1);
  }
}

int stop_notice_fd() {
  static int read_end = [] {
    int ends[2];
    if (pipe(ends) != 0) return -1;
    for (int fd : ends) fcntl(fd, F_SETFD, FD_CLOEXEC);
    fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK);
    g_notice_write.store(ends[1]);
    return ends[0];
  }();
  return read_end;
}

}  // namespace metile::host
