// User strings that can reach generated source (source-location file names, kernel and parameter
// names, constexpr records, attribute strings): rejected where they enter when they carry control
// characters, invalid UTF-8 or too many bytes, and escaped wherever they are written into source.
#include <gtest/gtest.h>
#include <metile/metile.h>

#include <unistd.h>

#include <string>
#include <vector>

#include "codegen/cpu_cpp.h"
#include "runtime/host/shared_object.h"
#include "runtime/cpu/toolchain.h"
#include "frontend/builder.h"
#include "ir/tile_ir.h"
#include "support/error.h"
#include "support/text.h"

namespace metile {
namespace METILE_UNITY_ID {

using namespace std::string_literals;

// Strings a comment or an identifier must never carry; each one alone is rejected.
const std::vector<std::string> kRejected = {
    "k.py\r",       "k.py\n",       "a\0b"s,      "tab\tname",  "del\x7f",
    "c1\xc2\x85",   "bad\xff",      "over\xc0\xaf", "sur\xed\xa0\x80", "cut\xe2\x82",
    std::string(kMaxTextBytes + 1, 'a'),
};

// Strings that are fine as text (a file may be named so) but must be escaped in a comment.
const std::vector<std::string> kAccepted = {"k.py", "dir/\xcf\x80.py", "a*/b", "trail\\", "q?\?/x"};

TEST(Text, RejectsControlCharactersInvalidUtf8AndLongStrings) {
  for (const std::string& s : kRejected) EXPECT_FALSE(text_problem(s).empty()) << printable_ascii(s);
  for (const std::string& s : kAccepted) EXPECT_EQ(text_problem(s), "") << printable_ascii(s);
  EXPECT_NE(text_problem("k.py\r").find("control character (U+000d) at byte 4"), std::string::npos);
  EXPECT_NE(text_problem("bad\xff").find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(text_problem(std::string(300, 'a'), kMaxNameBytes).find("300 bytes"), std::string::npos);
}

// The invariant every emitter relies on: the escaped text cannot leave a comment of either kind.
void expect_inert(const std::string& e) {
  for (char c : e) {
    unsigned char u = static_cast<unsigned char>(c);
    EXPECT_TRUE(u >= 0x20 && u <= 0x7e) << e;
  }
  EXPECT_EQ(e.find("*/"), std::string::npos) << e;
  EXPECT_EQ(e.find("/*"), std::string::npos) << e;
  EXPECT_EQ(e.find("??"), std::string::npos) << e;
  EXPECT_TRUE(e.empty() || e.back() != '\\') << e;
}

TEST(Text, PrintableAsciiIsInertInComments) {
  for (const auto* list : {&kRejected, &kAccepted})
    for (const std::string& s : *list) expect_inert(printable_ascii(s));
  EXPECT_EQ(printable_ascii("k.py\r//x"), "k.py\\x0d//x");
  EXPECT_EQ(printable_ascii("a*/b"), "a*\\x2fb");
  EXPECT_EQ(printable_ascii("trail\\"), "trail\\x5c");
  EXPECT_EQ(printable_ascii("\xcf\x80"), "\\xcf\\x80");
}

// Status and message of a C API call that must fail.
void expect_invalid(metile_status s, metile_status want, const char* names) {
  EXPECT_EQ(s, want);
  std::string msg = metile_last_error();
  EXPECT_NE(msg.find(names), std::string::npos) << msg;
  for (char c : msg) EXPECT_TRUE(c != '\r' && c != '\n') << msg;
}

// Every C API entry point that takes a string for the program, with each bad string (NUL cannot
// pass through a C string; the C++ builder test below covers it).
TEST(Text, SplitListKeepsNonEmptyItems) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(split_list("a,,b,"), (V{"a", "b"}));
  EXPECT_EQ(split_list(",x:int,y:num"), (V{"x:int", "y:num"}));
  EXPECT_EQ(split_list(""), V{});
  EXPECT_EQ(split_list(",,,"), V{});
  EXPECT_EQ(split_list("a;b", ';'), (V{"a", "b"}));
}

TEST(TextApi, BuilderEntryPointsRejectBadStrings) {
  for (const std::string& bad : kRejected) {
    if (bad.find('\0') != std::string::npos) continue;
    SCOPED_TRACE(printable_ascii(bad.substr(0, 20)));
    metile_builder* b = nullptr;
    expect_invalid(metile_builder_create(&b, bad.c_str()), METILE_ERROR_INVALID_ARGUMENT, "kernel name");
    ASSERT_EQ(metile_builder_create(&b, "k"), METILE_OK);
    expect_invalid(metile_builder_set_loc(b, bad.c_str(), 1), METILE_ERROR_INVALID_ARGUMENT,
                   "source file name");
    expect_invalid(metile_builder_set_constexpr(b, bad.c_str(), "1"), METILE_ERROR_INVALID_ARGUMENT,
                   "constexpr name");
    expect_invalid(metile_builder_set_constexpr(b, "BLOCK", bad.c_str()),
                   METILE_ERROR_INVALID_ARGUMENT, "constexpr BLOCK's value");
    metile_type t{};
    t.dtype = METILE_DTYPE_F32;
    t.is_pointer = 1;
    metile_value v{};
    expect_invalid(metile_builder_param(b, bad.c_str(), &t, &v), METILE_ERROR_INVALID_ARGUMENT,
                   "parameter name");
    EXPECT_EQ(metile_builder_release(b), METILE_OK);
  }
  // Fine as text, escaped at emission.
  metile_builder* b = nullptr;
  ASSERT_EQ(metile_builder_create(&b, "k"), METILE_OK);
  for (const std::string& ok : kAccepted) EXPECT_EQ(metile_builder_set_loc(b, ok.c_str(), 3), METILE_OK);
  EXPECT_EQ(metile_builder_release(b), METILE_OK);
}

TEST(TextApi, CppBuilderRejectsNul) {
  EXPECT_THROW(Builder("a\0b"s), Error);
  Builder b("k");
  EXPECT_THROW(b.set_loc("k\0.py"s, 1), Error);
  EXPECT_THROW(b.set_constexpr("N", "1\0"s), Error);
  EXPECT_THROW(b.param("x\0"s, Type::scalar(DType::f32)), Error);
}

std::string program_text(const std::string& file) {
  return "kernel @parsed(%X: ptr<f32>) {\n  %0 = const {value = 1.0} : f32\n  store %X, %0 loc(\"" +
         file + "\":1)\n}\n";
}

TEST(TextApi, ParserRejectsBadStrings) {
  for (const std::string& bad : kRejected) {
    if (bad.find('\0') != std::string::npos || bad.find('\n') != std::string::npos) continue;
    SCOPED_TRACE(printable_ascii(bad.substr(0, 20)));
    metile_program* p = nullptr;
    expect_invalid(metile_program_parse(&p, program_text(bad).c_str()), METILE_ERROR_INVALID_PROGRAM,
                   "line 3: the string");
    std::string ce = "kernel @k() constexprs(N = \"" + bad + "\") {\n}\n";
    expect_invalid(metile_program_parse(&p, ce.c_str()), METILE_ERROR_INVALID_PROGRAM, "the string");
  }
  // `\n` written as an escape inside the quotes is also a control character.
  metile_program* p = nullptr;
  expect_invalid(metile_program_parse(&p, program_text("k.py\\n").c_str()),
                 METILE_ERROR_INVALID_PROGRAM, "newline in a string");
  // Parsing NUL-containing text in C++ (the C API cannot pass it).
  EXPECT_THROW(parse(program_text("k\0.py"s)), Error);
}

TEST(TextApi, VerifierRejectsBadStringsInProgramsMadeOtherwise) {
  for (const std::string& bad : kRejected) {
    Program p = parse(program_text("k.py"));
    p.files[0] = bad;
    EXPECT_THROW(verify(p), Error) << printable_ascii(bad.substr(0, 20));
    Program q = parse(program_text("k.py"));
    q.constexprs.emplace_back("N", bad);
    EXPECT_THROW(verify(q), Error);
  }
}

// The reviewed exploit: a `\r` in a location ends the `//` comment for g++ and clang, and the rest
// of the name became C++ run at load time. It is refused at every entry point, and even a program
// that carries it past them gets it as one inert comment line.
const std::string kMarker = "/tmp/metile-text-injection-" + std::to_string(getpid());
const std::string kExploit =
    "k.py\rextern int mt_sys(const char*) __asm__(\"system\"); static int mt_once = "
    "mt_sys(\"touch " + kMarker + "\");\r//";

TEST(TextInjection, OldExploitIsRefusedAndCannotRunOnCpu) {
  unlink(kMarker.c_str());
  metile_program* p = nullptr;
  std::string text = program_text(kExploit);
  // The parser reads `\"` inside quotes as a quote; escape them as the printer would.
  std::string quoted;
  for (char c : kExploit) quoted += (c == '"' ? "\\\""s : std::string(1, c));
  EXPECT_EQ(metile_program_parse(&p, program_text(quoted).c_str()), METILE_ERROR_INVALID_PROGRAM);
  metile_builder* b = nullptr;
  ASSERT_EQ(metile_builder_create(&b, "k"), METILE_OK);
  EXPECT_EQ(metile_builder_set_loc(b, kExploit.c_str(), 1), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(metile_builder_release(b), METILE_OK);

  // Past the checks (a program edited in C++): the generated source keeps it in a comment.
  Program prog = parse(program_text("k.py"));
  for (const std::string& evil : {kExploit, "a*/b"s, "trail\\"s, "x\ny\0z"s, "bad\xff"s}) {
    prog.files[0] = evil;
    std::string src = generate_cpu_cpp(prog).text;
    EXPECT_EQ(src.find('\r'), std::string::npos);
    EXPECT_EQ(src.find('\0'), std::string::npos);
    size_t start = 0;
    while (start < src.size()) {
      size_t end = src.find('\n', start);
      if (end == std::string::npos) end = src.size();
      std::string line = src.substr(start, end - start);
      start = end + 1;
      if (line.find("mt_sys") != std::string::npos || line.find("trail") != std::string::npos ||
          line.find("a*") != std::string::npos) {
        EXPECT_EQ(line.substr(line.find_first_not_of(' '), 2), "//") << line;
        expect_inert(line.substr(line.find("//") + 2));
      }
    }
  }
  EXPECT_NE(access(kMarker.c_str(), F_OK), 0) << "the injected command ran";
}

// Mirrors mt_range in the CPU prelude.
struct Range {
  uint32_t grid[3];
  uint32_t reserved;
  uint64_t begin, end;
  uint32_t stream;
};

// Loads the compiled kernel and runs its one program instance on `x`.
void run_once(const std::vector<uint8_t>& so_bytes, float* x) {
  host::SharedObject so(so_bytes, "test", "parsed");
  Range r{{1, 1, 1}, 0, 0, 1, 0};
  reinterpret_cast<void (*)(float*, const Range*)>(so.symbol("metile_entry"))(x, &r);
}

// The generated source with the exploit in its location is compiled, loaded and run: the kernel
// stores its value and nothing else runs. The control, the same source with the raw name put
// back, does run the payload, so the check is a real one.
TEST(TextInjection, ExploitInGeneratedSourceDoesNotRunWhenLoaded) {
  if (!cpu::probe_compiler().empty()) GTEST_SKIP() << "no host C++ compiler";
  unlink(kMarker.c_str());
  Program prog = parse(program_text("k.py"));
  prog.files[0] = kExploit;
  std::string src = generate_cpu_cpp(prog).text;
  cpu::Toolchain tc = cpu::current_toolchain();
  float x = 0;
  run_once(cpu::compile_shared_object(tc, src, "parsed"), &x);
  EXPECT_EQ(x, 1.0f);
  EXPECT_NE(access(kMarker.c_str(), F_OK), 0) << "the injected command ran";

  std::string escaped = printable_ascii(kExploit);
  size_t at = src.find(escaped);
  ASSERT_NE(at, std::string::npos);
  src.replace(at, escaped.size(), kExploit);
  run_once(cpu::compile_shared_object(tc, src, "parsed"), &x);
  EXPECT_EQ(access(kMarker.c_str(), F_OK), 0) << "the control did not run: the test proves nothing";
  unlink(kMarker.c_str());
}

}  // namespace
}  // namespace metile
