// Swizzles, the bank-conflict counter, and the hardware fragment layouts (matrix-unit atoms).
#include <algorithm>
#include <map>
#include <set>

#include "ir/layout.h"
#include "support/error.h"

namespace metile {

Swizzle::Swizzle(int bits, int base, int shift) : bits_(bits), base_(base), shift_(shift) {
  // shift >= bits keeps the source bits [base+shift, ...) clear of the target bits
  // [base, base+bits), which is what makes the swizzle its own inverse.
  if (bits < 0 || base < 0 || shift < bits || (bits > 0 && shift < 1) || base + shift + bits > 62)
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "swizzle: Sw<", bits, ",", base, ",", shift,
         "> needs bits >= 0, base >= 0, shift >= bits and base+shift+bits <= 62");
}

int64_t Swizzle::operator()(int64_t offset) const {
  if (offset < 0)
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "swizzle: ", str(), " of negative offset ",
         offset);
  return offset ^ ((offset >> shift_) & mask());
}

std::string Swizzle::str() const {
  return cat("Sw<", bits_, ",", base_, ",", shift_, ">");
}

int bank_conflict_ways(const Layout& thread_to_word, const Swizzle& swizzle, int banks,
                       int group) {
  if (banks < 1 || group < 1)
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "bank_conflict_ways: ", banks, " banks and ",
         group, " threads per access must both be positive");
  int worst = 1;
  int64_t n = thread_to_word.size();
  for (int64_t start = 0; start < n; start += group) {
    std::map<int64_t, std::set<int64_t>> words_per_bank;
    for (int64_t i = start; i < std::min(n, start + group); ++i) {
      int64_t word = swizzle(thread_to_word(i));
      words_per_bank[word % banks].insert(word);
    }
    for (const auto& [bank, words] : words_per_bank)
      worst = std::max(worst, static_cast<int>(words.size()));
  }
  return worst;
}

// Apple does not document the lane ownership of simdgroup_matrix<T,8,8>; this is the mapping the
// original metile emitter verified on hardware (metile-spec §8.6) and the one MLX's steel kernels
// use (BaseMMAFrag::get_coord: row = (qid & 4) + ((lane / 2) % 4), col = (qid & 2) * 2 +
// (lane % 2) * 2, qid = lane / 4). Lane bits (b0, b1b2, b3, b4) go to col bit 1, row bits 0-1,
// col bit 2, row bit 2; in the offset row + 8*col those are strides 16, 1, 32, 4. Value v is
// col + v: stride 8.
Layout simdgroup_8x8_fragment() {
  return make_layout(tup(tup(2, 4, 2, 2), 2), tup(tup(16, 1, 32, 4), 8));
}

// The NVIDIA layouts transcribe the PTX ISA section "Matrix Fragments for mma.m16n8k8" and
// "... mma.m16n8k16 with floating point type": groupID = lane >> 2, threadID_in_group = lane % 4.
// The lane mode is (threadID_in_group, groupID) = (4,8).

// A 16x8 tf32: row = groupID (+8 for a1, a3), col = threadID_in_group (+4 for a2, a3).
Layout mma_m16n8k8_tf32_a() {
  return make_layout(tup(tup(4, 8), tup(2, 2)), tup(tup(16, 1), tup(8, 64)));
}

// B 8x8 tf32 (k, n): k = threadID_in_group (+4 for b1), n = groupID.
Layout mma_m16n8k8_tf32_b() { return make_layout(tup(tup(4, 8), 2), tup(tup(1, 8), 4)); }

// A 16x16 f16: row = groupID (+8 for a2, a3, a6, a7), col = threadID_in_group*2 + (i & 1)
// (+8 for a4..a7).
Layout mma_m16n8k16_f16_a() {
  return make_layout(tup(tup(4, 8), tup(2, 2, 2)), tup(tup(32, 1), tup(16, 8, 128)));
}

// B 16x8 f16 (k, n): k = threadID_in_group*2 + (i & 1) (+8 for b2, b3), n = groupID.
Layout mma_m16n8k16_f16_b() {
  return make_layout(tup(tup(4, 8), tup(2, 2)), tup(tup(2, 16), tup(1, 8)));
}

// C/D 16x8 f32: row = groupID (+8 for c2, c3), col = threadID_in_group*2 + (i & 1).
Layout mma_m16n8_f32_c() {
  return make_layout(tup(tup(4, 8), tup(2, 2)), tup(tup(32, 1), tup(16, 8)));
}

}  // namespace metile
