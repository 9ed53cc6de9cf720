# lit configuration for the IR tests: each .smp file has `# RUN:` lines that compile it with
# --emit=ir (or llvm) and pipe the output into FileCheck, which matches its `# CHECK:` lines.
import os
import lit.formats

config.name = "shmapc-ir"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".smp"]
config.test_source_root = os.path.dirname(__file__)
# lit's Output/ folders and its .lit_test_times.txt go where CTest says (the build folder), not
# beside the tests: no test run writes into the source tree (tests/source_tree/check.py).
config.test_exec_root = os.environ.get("SHMAPC_LIT_EXEC_ROOT") or None
config.substitutions.append(("%shmapc", os.environ.get("SHMAPC", "shmapc")))
config.substitutions.append(("%FileCheck", "/usr/lib/llvm-19/bin/FileCheck"))
config.substitutions.append(("%not", "/usr/lib/llvm-19/bin/not"))
