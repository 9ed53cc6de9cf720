"""What the tests/io scripts share: named checks that print ok / FAIL and are counted, and a
look at the running processes."""
import os

FAILED = []


def processes():
    """(pid, fields of /proc/PID/stat after the command's name: state, ppid, pgrp, ...) of every
    process still there when read."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            fields = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        yield int(p), fields


def expect(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILED.append(what)
        if detail:
            print("     " + detail.replace("\n", "\n     "))
