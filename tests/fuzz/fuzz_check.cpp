// libFuzzer target: the input bytes are a program `fuzz.smp`, run through everything
// `shmapc check` runs (lexer, parser, sema, the IR passes) with the IR verifier after each
// stage. Built only with -DSHMAPC_FUZZ=ON (clang); run it with tools/fuzz.sh.
//
// A user error (exit status 1) is fine; anything else a front end must never do aborts, so
// libFuzzer records the input: a sanitizer report, an internal error (status 2: the verifier
// failed), an exception other than CompileError, status 1 without an error reported or with
// an error that does not say FILE:LINE:COL, or status 0 with one. As in the golden tests, a leading `# FLAGS: ...` comment line sets
// --explicit-pbroadcast, --no-check-vma and --transpose=naive (other words are ignored), so
// the fuzzer reaches those paths too. SHMAPC_FUZZ_SHOW=1 prints each input's status and
// diagnostics (for triage).
#include "driver/Modules.h"
#include "driver/Pipeline.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

using namespace shmapc;

namespace {

// The stdlib modules, read once at start-up: imports resolve only to these, never to files.
std::map<std::string, std::string> stdlibModules;

void loadStdlib() {
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(stdlibDir(), ec)) {
    if (entry.path().extension() != ".smp") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    stdlibModules[entry.path().stem().string()] = text.str();
  }
  if (stdlibModules.empty()) {
    std::fprintf(stderr, "fuzz_check: no modules in %s\n", stdlibDir().c_str());
    std::exit(1);
  }
}

int resolveModule(const std::string &name, SourceManager &sm) {
  auto it = stdlibModules.find(name);
  return it == stdlibModules.end() ? -1 : sm.addBuffer("stdlib/" + name + ".smp", it->second);
}

// The flags of the leading comment lines `# FLAGS: ...` (tests/golden.py's convention).
void applyFlags(const std::string &text, CompileOptions &opts) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line) && line.rfind("#", 0) == 0;) {
    if (line.rfind("# FLAGS:", 0) != 0) continue;
    std::istringstream words(line.substr(8));
    for (std::string w; words >> w;) {
      opts.explicitPbroadcast |= w == "--explicit-pbroadcast";
      opts.noCheckVma |= w == "--no-check-vma";
      opts.naiveTranspose |= w == "--transpose=naive";
    }
  }
}

[[noreturn]] void fail(const char *what, const std::string &diagnostics) {
  std::fprintf(stderr, "fuzz_check: %s\n%s", what, diagnostics.c_str());
  std::abort();
}

// Whether every error line names its place: `FILE:LINE:COL: error:` with FILE the program or
// a stdlib module (no exit-1 message without file:line:col).
bool everyErrorLocated(const std::string &diagnostics) {
  std::istringstream lines(diagnostics);
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.find(": error: ");
    if (at == std::string::npos || line.rfind("  ", 0) == 0 || line.rfind("    ", 0) == 0) continue;
    std::string place = line.substr(0, at);  // FILE:LINE:COL
    size_t c2 = place.rfind(':'), c1 = c2 == std::string::npos ? c2 : place.rfind(':', c2 - 1);
    if (c1 == std::string::npos || c1 == 0) return false;
    std::string file = place.substr(0, c1), ln = place.substr(c1 + 1, c2 - c1 - 1),
                col = place.substr(c2 + 1);
    bool digits = !ln.empty() && !col.empty() &&
                  ln.find_first_not_of("0123456789") == std::string::npos &&
                  col.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || (file != "fuzz.smp" && file.rfind("stdlib/", 0) != 0)) return false;
  }
  return true;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  loadStdlib();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  CompileOptions opts;
  opts.input = "fuzz.smp";
  opts.inputText = &text;
  opts.resolveModule = resolveModule;
  opts.checkOnly = true;
  opts.verifyEach = true;
  applyFlags(text, opts);
  std::ostringstream diags;  // formatted (that code runs too), then dropped
  int rc;
  try {
    rc = compile(opts, diags);
  } catch (const std::exception &e) {
    fail((std::string("uncaught exception: ") + e.what()).c_str(), diags.str());
  }
  static const bool show = std::getenv("SHMAPC_FUZZ_SHOW");
  if (show) std::fprintf(stderr, "status %d\n%s", rc, diags.str().c_str());
  bool reported = diags.str().find("error: ") != std::string::npos;
  if (rc == 1 && !reported) fail("status 1 without an error", diags.str());
  if (rc == 1 && !everyErrorLocated(diags.str())) fail("an error without file:line:col", diags.str());
  if (rc == 0 && reported) fail("an error reported, yet status 0", diags.str());
  if (rc != 0 && rc != 1) fail(("internal error, status " + std::to_string(rc)).c_str(), diags.str());
  return 0;
}
