// shmapc: the command line. `compile`, `run` and `check` share the compile options.
#include "driver/Interrupt.h"
#include "driver/Pipeline.h"

#include <CLI/CLI.hpp>

#include <cctype>
#include <iostream>
#include <sys/wait.h>

using namespace shmapc;

namespace {

struct Args {
  CompileOptions opts;
  std::string emit = "exe";
  std::vector<std::string> runArgs;
  std::string transpose = "optimal";
};

std::vector<std::string> emitNameList() {
  std::vector<std::string> names;
  for (const auto &[name, view] : emitNames()) names.push_back(name);
  return names;
}

void addCompileOptions(CLI::App *cmd, Args &a) {
  cmd->add_option("file", a.opts.input, "the .smp program")->required();
  cmd->add_option("--emit", a.emit,
                  "stop after a stage and print it: tokens|ast|ir|comm|sharded|stages|schedule|plan|llvm|asm|obj|exe "
                  "(comm: the static communication report; sharded: the jit functions' shardings; stages and schedule: "
                  "each pipeline's stages and its schedule's clock-by-stage grid; "
                  "plan: codegen's fused loops, buffers, in-place updates and kernel calls)")
      ->check(CLI::IsMember(emitNameList()));
  cmd->add_option("--print-after", a.opts.printAfter,
                  "print the IR to stderr after each named pass (comma-separated, or all), the compile "
                  "going on; the passes: shmapc --list-passes")
      ->delimiter(',');
  cmd->add_option("--stop-after", a.opts.stopAfter,
                  "stop after that pass (sema: the IR sema built) and make the --emit view (default ir) "
                  "from the IR there; the passes: shmapc --list-passes");
  cmd->add_option("-O", a.opts.optLevel, "optimisation level 0..3 (default 2)")
      ->check(CLI::Range(0, 3));
  cmd->add_option("--target-cpu", a.opts.targetCpu,
                  "the CPU to generate code for, like clang's -march: native (default: this machine's), "
                  "x86-64, x86-64-v2, x86-64-v3, x86-64-v4, or a CPU LLVM knows (haswell, skylake-avx512, "
                  "sapphirerapids, znver4, ...); the program refuses to start on a CPU that lacks its features");
  cmd->add_option("-I", a.opts.includeDirs, "add a folder to the module search path");
  cmd->add_flag("--verify-each", a.opts.verifyEach, "run the IR verifier after every pass");
  cmd->add_flag("--explicit-pbroadcast", a.opts.explicitPbroadcast,
                "no automatic pbroadcast insertion: a variance mismatch is an error");
  cmd->add_flag("--no-check-vma", a.opts.noCheckVma,
                "turn variance checking off (shard_map's behaviour without device-variance types)");
  cmd->add_flag("--mpi", a.opts.mpi,
                "link the MPI runtime: run the program under mpirun, each rank running --devices-per-rank "
                "of every mesh's devices (docs/runtime.md)");
  cmd->add_flag("--jit-whole", a.opts.jitWhole,
                "run every jit function whole on the host, unpartitioned (the reference for its partitioned run)");
  cmd->add_flag("--time-passes", a.opts.timePasses,
                "print to stderr the seconds each stage took (parse, sema, each IR pass, LLVM IR emission, "
                "LLVM's optimisation and code generation, link), then LLVM's report of its own passes");
  cmd->add_option("--transpose", a.transpose,
                  "optimal (default: the device-variance-typed rules) or naive (psum defensively, for comparison)")
      ->check(CLI::IsMember({"optimal", "naive"}));
}

// The first option after the subcommand that `sub` does not know ("" if none): `--name[=v]`
// or `-X[value]`; arguments after `--` belong to the program.
std::string firstUnknownOption(const CLI::App &sub, int argc, char **argv) {
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    std::string name = arg[1] == '-' ? arg.substr(0, arg.find('=')) : arg.substr(0, 2);
    if (!sub.get_option_no_throw(name)) return arg;
  }
  return "";
}

// CLI11's parse errors as one line in the driver's format, saying where the help is.
int reportParseError(CLI::App &app, const CLI::ParseError &e, int argc, char **argv) {
  std::string cmd = "shmapc";
  for (const CLI::App *sub : app.get_subcommands()) cmd += " " + sub->get_name();
  std::string msg = e.what();
  // CLI11 checks required arguments before unknown ones: `shmapc compile --bogus` would say
  // "file is required"; name the unknown option instead.
  if (dynamic_cast<const CLI::RequiredError *>(&e) && !app.get_subcommands().empty())
    if (std::string unknown = firstUnknownOption(*app.get_subcommands().back(), argc, argv);
        !unknown.empty())
      msg = "the following argument was not expected: " + unknown;
  if (cmd == "shmapc" && argc > 1 && argv[1][0] != '-')
    msg = std::string("unknown command '") + argv[1] + "' (the commands are compile, run and check)";
  else if (cmd == "shmapc" && dynamic_cast<const CLI::RequiredError *>(&e))
    msg = "no command given (the commands are compile, run and check)";
  // "The following argument ..." -> "the following ...", but not "-O: Value ..." or "ASCII".
  if (msg.size() > 1 && std::isupper((unsigned char)msg[0]) && !std::isupper((unsigned char)msg[1]))
    msg[0] = (char)std::tolower((unsigned char)msg[0]);
  if (cmd == "shmapc run" && dynamic_cast<const CLI::ExtrasError *>(&e))
    msg += " (arguments for the program go after --: shmapc run prog.smp -- --stats)";
  std::cerr << "shmapc: error: " << msg << "; see '" << cmd << " --help'\n";
  return 1;
}

// `shmapc run`: compile into a temporary folder, run, pass the exit status on. A signal while
// it compiles ends shmapc there (Interrupt.h); one while the program runs is passed on to it
// (a terminal's ^C reaches it directly as well, which is harmless), and shmapc then waits for
// it, removes the folder and exits with 128 + the signal, as a shell reports a program the
// signal ended.
int runProgram(Args &a) {
  std::string error;
  const std::string dir = interrupt::makeTemporaryFolder("shmapc-run", error);
  if (dir.empty()) {
    std::cerr << "shmapc: error: " << error << "\n";
    return 2;
  }
  std::string exe = dir + "/prog";
  a.opts.output = exe;
  int rc = compile(a.opts);
  if (rc == 0) {
    std::vector<std::string> argv = {exe};
    argv.insert(argv.end(), a.runArgs.begin(), a.runArgs.end());
    int status = 0;
    if (!interrupt::runChild(interrupt::Child::Program, argv, status, error)) {
      rc = -1;
    } else if (WIFEXITED(status)) {
      rc = WEXITSTATUS(status);
    } else if (!interrupt::signalPassedOn()) {
      error = "'" + exe + "' was killed by signal " + std::to_string(WTERMSIG(status));
      rc = -1;
    }
    if (rc < 0) {
      std::cerr << "shmapc: error: " << error << "\n";
      rc = 2;
    }
  }
  interrupt::removeTemporaryFolder(dir);
  if (int sig = interrupt::signalPassedOn()) return 128 + sig;
  return rc;
}

} // namespace

int main(int argc, char **argv) {
  interrupt::install();  // first: the threads made later inherit its signal mask
  CLI::App app{"shmapc: a compiler for shard_map-style SPMD array programs"};
  app.set_version_flag("--version", std::string("shmapc ") + SHMAPC_VERSION);
  app.require_subcommand(1);
  // (a callback: it runs before CLI11 asks for a command)
  app.add_flag_callback(
      "--list-passes",
      [] {
        std::cout << "The IR stages, in order (--print-after=NAME[,NAME...]|all, --stop-after=NAME):\n";
        for (const std::string &name : stageNames()) std::cout << "  " << name << "\n";
        throw CLI::Success();
      },
      "list the IR passes --print-after and --stop-after name (sema: the IR sema built)");

  Args a;
  CLI::App *compileCmd = app.add_subcommand("compile", "compile a program to an executable");
  addCompileOptions(compileCmd, a);
  compileCmd->add_option("-o", a.opts.output, "output file (default a.out; text emits: stdout)");

  CLI::App *runCmd = app.add_subcommand("run", "compile a program and run it");
  addCompileOptions(runCmd, a);
  runCmd->add_option("args", a.runArgs, "arguments for the program (after --), e.g. -- --stats");

  CLI::App *checkCmd = app.add_subcommand("check", "report diagnostics only");
  addCompileOptions(checkCmd, a);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return reportParseError(app, e, argc, argv);
  }
  if (runCmd->parsed() && a.opts.mpi) {
    std::cerr << "shmapc: error: an --mpi program runs under mpirun: 'shmapc compile prog.smp --mpi -o prog' "
                 "then 'mpirun -np N ./prog'\n";
    return 1;
  }
  if (compileCmd->count("-o") && a.opts.output.empty()) {
    std::cerr << "shmapc: error: -o needs a file name; see 'shmapc compile --help'\n";
    return 1;
  }
  CLI::App *parsedCmd = compileCmd->parsed() ? compileCmd : runCmd->parsed() ? runCmd : checkCmd;
  if (parsedCmd->count("--stop-after") && a.opts.stopAfter.empty()) {
    std::cerr << "shmapc: error: --stop-after needs a pass name; see 'shmapc --list-passes'\n";
    return 1;
  }
  // --stop-after without --emit shows the IR there (`check` shows nothing unless asked).
  if (!a.opts.stopAfter.empty() && !parsedCmd->count("--emit") && !checkCmd->parsed()) a.emit = "ir";
  for (const auto &[name, view] : emitNames())
    if (name == a.emit) a.opts.emit = view;
  a.opts.naiveTranspose = a.transpose == "naive";
#ifndef NDEBUG
  a.opts.verifyEach = true;  // debug builds check the IR after every pass
#endif
  try {
    if (checkCmd->parsed()) {
      a.opts.checkOnly = true;  // stops after the IR passes
      return compile(a.opts);
    }
    if (runCmd->parsed() && a.opts.emit == Emit::Exe) return runProgram(a);
    return compile(a.opts);
  } catch (const std::exception &e) {
    std::cerr << "shmapc: internal error: " << e.what() << "\n";
    return 3;
  }
}
