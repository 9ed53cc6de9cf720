"""What the MPI test scripts share: an mpirun that runs as root with more ranks than cores,
and named checks that print ok / FAIL and are counted."""

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe",
          # more ranks than cores: a waiting rank yields its core instead of spinning
          "--mca", "mpi_yield_when_idle", "1"]
FAILED = []


def expect(what, ok, detail=""):
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        FAILED.append(what)
        print(detail)
