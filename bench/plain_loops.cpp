// The reference the vector-add benchmark compares with: the loop a C++ programmer would write.
#include <cstddef>

namespace metile::bench {

void plain_vector_add(const float* x, const float* y, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

}  // namespace metile::bench
