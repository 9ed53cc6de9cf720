# lit configuration for the IR tests: each .smp file has `# RUN:` lines that compile it with
# --emit=ir (or llvm) and pipe the output into FileCheck, which matches its `# CHECK:` lines.
import os
import lit.formats

config.name = "shmapc-ir"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".smp"]
config.test_source_root = os.path.dirname(__file__)
config.substitutions.append(("%shmapc", os.environ.get("SHMAPC", "shmapc")))
config.substitutions.append(("%FileCheck", "/usr/lib/llvm-19/bin/FileCheck"))
config.substitutions.append(("%not", "/usr/lib/llvm-19/bin/not"))
