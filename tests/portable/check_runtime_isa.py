#!/usr/bin/env python3
"""The runtime archives every program links are compiled for baseline x86-64 (SSE2), so a
program built on this machine runs on any x86-64 CPU that has what its --target-cpu needs
(the start-up check, runtime/cpu_check.cpp, says what that is): no -march=native or other
-m flag may reach them. Disassembles each archive and fails on any instruction beyond
x86-64's baseline: AVX and later (VEX and EVEX encodings: mnemonics starting with v; ymm,
zmm and mask registers) and the SSE3/SSSE3/SSE4/POPCNT/LZCNT/BMI/MOVBE instructions a
compiler picks for itself.

  check_runtime_isa.py build/runtime/libshmap_runtime.a [more archives]
"""
import re
import subprocess
import sys

# What compilers generate from plain C++ once -msse3 ... -mbmi2 allow it (SSE2 forms such as
# pminsw, pextrw, pinsrw are baseline and not listed). tzcnt is not listed: GCC's generic
# tuning writes `rep bsf`, which objdump prints as tzcnt and which older CPUs run as bsf.
BEYOND_SSE2 = set("""
  movddup movshdup movsldup haddps haddpd hsubps hsubpd addsubps addsubpd lddqu
  pshufb palignr pabsb pabsw pabsd phaddw phaddd phaddsw phsubw phsubd phsubsw pmaddubsw
  pmulhrsw psignb psignw psignd
  ptest pblendw pblendvb blendps blendpd blendvps blendvpd roundps roundpd roundss roundsd
  pminsb pminsd pminuw pminud pmaxsb pmaxsd pmaxuw pmaxud pmulld pmuldq pcmpeqq pcmpgtq
  packusdw pextrb pextrd pextrq pinsrb pinsrd pinsrq insertps extractps dpps dppd mpsadbw
  phminposuw movntdqa pmovzxbw pmovzxbd pmovzxbq pmovzxwd pmovzxwq pmovzxdq pmovsxbw pmovsxbd
  pmovsxbq pmovsxwd pmovsxwq pmovsxdq crc32 pcmpestri pcmpestrm pcmpistri pcmpistrm
  popcnt lzcnt andn bextr blsi blsmsk blsr bzhi pdep pext mulx rorx sarx shlx shrx movbe
""".split())
REGISTERS = re.compile(r"%(ymm|zmm)\d+|%k[0-7]\b")
NOT_AVX = {"verr", "verw"}  # system instructions that happen to start with v


def main():
    bad = []
    for lib in sys.argv[1:]:
        out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", lib], capture_output=True, text=True,
                             check=True).stdout
        function, count, before = "", 0, len(bad)
        for line in out.splitlines():
            m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
            if m:
                function = m.group(1)
                continue
            parts = line.split("\t")
            if len(parts) < 2 or not re.match(r"^\s*[0-9a-f]+:$", parts[0]):
                continue
            count += 1
            insn = parts[1].strip()
            words = insn.split()
            mnemonic = words[0] if words else ""
            if mnemonic in ("rep", "repz", "repnz", "lock", "data16", "cs", "notrack") and len(words) > 1:
                mnemonic = words[1]
            if (mnemonic.startswith("v") and mnemonic not in NOT_AVX) or mnemonic in BEYOND_SSE2 \
                    or REGISTERS.search(insn):
                bad.append("%s: %s: %s" % (lib, function, insn))
        if count == 0:
            bad.append("%s: no instructions disassembled" % lib)
        print("%s: %d instructions, %d beyond baseline x86-64" % (lib, count, len(bad) - before))
    for b in bad[:50]:
        print(b)
    if bad:
        print("%d instructions beyond baseline x86-64 (is -march set in CMAKE_CXX_FLAGS?)" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
