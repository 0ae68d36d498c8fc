// Writes the parser fuzzer's seed corpus (every suite kernel, printed with and without source
// locations) and a libFuzzer dictionary of the text form's tokens (every op name from the op
// table, dtypes, keywords) into the directory given as the only argument.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "ir/ops.h"
#include "kernels/kernels.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: parse_fuzz_corpus DIR\n";
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path dir = argv[1];
  fs::create_directories(dir / "corpus");
  int n = 0;
  for (const metile::Program& p : metile::kernels::all_programs())
    for (bool locs : {true, false})
      std::ofstream(dir / "corpus" / (std::to_string(n++) + "_" + p.name + ".mtir"))
          << metile::print(p, locs);
  std::ofstream dict(dir / "tile_ir.dict");
  for (metile::OpKind k : metile::all_ops()) dict << "\"" << metile::op_name(k) << "\"\n";
  for (const char* t : {"kernel @",
                        "num_threads(",
                        "constexprs(",
                        "iter_args(",
                        " to ",
                        " step ",
                        "->",
                        "loc(\\\"",
                        "tile<",
                        "ptr<",
                        ", threadgroup>",
                        "f32",
                        "f16",
                        "bf16",
                        "i32",
                        "u32",
                        "i64",
                        "bool",
                        "i8",
                        "u8",
                        "{axis = ",
                        "{size = ",
                        "{value = ",
                        "inf",
                        "nan",
                        "-inf",
                        "1e38",
                        "%"})
    dict << "\"" << t << "\"\n";
  std::cout << "wrote " << n << " seeds and tile_ir.dict to " << dir << "\n";
  return 0;
}
