#include "support/embedded.h"

#include "support/error.h"

namespace metile {

std::string_view embedded_file(std::string_view name) {
  for (const EmbeddedFile* f = kEmbeddedFiles; f->name != nullptr; ++f)
    if (name == f->name) return {f->data, f->size};
  fail(METILE_ERROR_INTERNAL, "embedded", "no embedded file ", name);
}

}  // namespace metile
