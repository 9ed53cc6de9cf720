#!/usr/bin/env python3
"""Where `shmapc compile -o` and the runtime's save write (runtime/abi/safe_write.h,
docs/runtime.md "Output files"): a symbolic link to a regular file is written through (the
link stays), a FIFO and a link to /dev/null are written in place and stay what they are, a
socket and a dangling link are refused, a new file has the mode of any new file, and no
temporary file is left behind.

    python3 tests/io/check_outputs.py --shmapc build/compiler/shmapc"""
import argparse
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import FAILED, expect  # noqa: E402

PROGRAM = """# A program that saves its array where --out says.
arg out: str = "w.npy";
def main() {
  let w = reshape(iota(f32[6]), [2, 3]) * 0.5 - 1.0;
  save(out, w);
  print(w);
}
"""


def umask():
    m = os.umask(0o22)
    os.umask(m)
    return m


def read_fifo(path, into):
    with open(path, "rb") as f:
        into.append(f.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "prog.smp")
        open(src, "w").write(PROGRAM)
        ir = subprocess.run([a.shmapc, "compile", src, "--emit=ir"], capture_output=True, check=True).stdout

        def compile_to(out, *extra):
            return subprocess.run([a.shmapc, "compile", src, "-o", out] + list(extra), capture_output=True, text=True,
                                  timeout=300)

        def listing(d):
            return sorted(os.listdir(d))

        # A symbolic link to a regular file: written through, the link stays.
        d = os.path.join(tmp, "link")
        os.mkdir(d)
        open(os.path.join(d, "real.ir"), "w").write("old")
        os.symlink("real.ir", os.path.join(d, "out.ir"))
        r = compile_to(os.path.join(d, "out.ir"), "--emit=ir")
        expect("--emit=ir -o a link to a file: the link stays, its target gets the IR",
               r.returncode == 0 and os.path.islink(os.path.join(d, "out.ir")) and
               open(os.path.join(d, "real.ir"), "rb").read() == ir and listing(d) == ["out.ir", "real.ir"],
               "status %d, %s, %s" % (r.returncode, r.stderr, listing(d)))

        # A FIFO: written in place (a reader waits on it), and still a FIFO.
        fifo = os.path.join(tmp, "fifo")
        os.mkfifo(fifo)
        got = []
        reader = threading.Thread(target=read_fifo, args=(fifo, got))
        reader.start()
        r = compile_to(fifo, "--emit=ir")
        reader.join(60)
        expect("--emit=ir -o a FIFO: the reader gets the IR, the FIFO stays",
               r.returncode == 0 and got == [ir] and stat.S_ISFIFO(os.lstat(fifo).st_mode),
               "status %d, %s" % (r.returncode, r.stderr))

        # An executable onto a link to /dev/null: nothing replaced.
        d = os.path.join(tmp, "null")
        os.mkdir(d)
        os.symlink("/dev/null", os.path.join(d, "prog"))
        r = compile_to(os.path.join(d, "prog"))
        expect("-o a link to /dev/null: the link and /dev/null stay what they are",
               r.returncode == 0 and os.path.islink(os.path.join(d, "prog")) and
               stat.S_ISCHR(os.stat(os.path.join(d, "prog")).st_mode) and stat.S_ISCHR(os.stat("/dev/null").st_mode)
               and listing(d) == ["prog"], "status %d, %s, %s" % (r.returncode, r.stderr, listing(d)))

        # A new executable: mode 0777 less the umask; it runs; nothing else in its folder.
        d = os.path.join(tmp, "exe")
        os.mkdir(d)
        exe = os.path.join(d, "prog")
        r = compile_to(exe)
        mode = os.stat(exe).st_mode & 0o777 if os.path.exists(exe) else None
        expect("-o a new file: mode 0777 less the umask, nothing else left in the folder",
               r.returncode == 0 and mode == 0o777 & ~umask() and listing(d) == ["prog"],
               "status %d, %s, mode %s, %s" % (r.returncode, r.stderr, oct(mode or 0), listing(d)))

        # An executable through a link to an existing program: the link stays, the target runs.
        os.symlink("prog", os.path.join(d, "latest"))
        r = compile_to(os.path.join(d, "latest"))
        run = subprocess.run([os.path.join(d, "latest"), "--out=" + os.path.join(d, "w.npy")], capture_output=True,
                             text=True, timeout=120)
        expect("-o a link to a program: the link stays and runs the new program",
               r.returncode == 0 and os.path.islink(os.path.join(d, "latest")) and run.returncode == 0 and
               run.stdout.startswith("f32[2,3]"), "status %d, %s, run %d %s %s" %
               (r.returncode, r.stderr, run.returncode, run.stdout, run.stderr))

        # The program's save: onto a FIFO and a link to /dev/null, in place.
        got = []
        reader = threading.Thread(target=read_fifo, args=(fifo, got))
        reader.start()
        run = subprocess.run([exe, "--out=" + fifo], capture_output=True, text=True, timeout=120)
        reader.join(60)
        expect("save to a FIFO: the reader gets the .npy bytes, the FIFO stays",
               run.returncode == 0 and got and got[0] == open(os.path.join(d, "w.npy"), "rb").read() and
               stat.S_ISFIFO(os.lstat(fifo).st_mode), "status %d, %s" % (run.returncode, run.stderr))
        run = subprocess.run([exe, "--out=" + os.path.join(tmp, "null", "prog")], capture_output=True, text=True,
                             timeout=120)
        expect("save to a link to /dev/null: it stays a link to a character device",
               run.returncode == 0 and os.path.islink(os.path.join(tmp, "null", "prog")) and
               stat.S_ISCHR(os.stat(os.path.join(tmp, "null", "prog")).st_mode),
               "status %d, %s" % (run.returncode, run.stderr))

        # -o /dev/stdout with standard output redirected to a file: that file (the same one,
        # which the redirection holds open) gets the IR.
        redirected = os.path.join(tmp, "stdout.ir")
        with open(redirected, "wb") as f:
            inode = os.fstat(f.fileno()).st_ino
            r = subprocess.run([a.shmapc, "compile", src, "--emit=ir", "-o", "/dev/stdout"], stdout=f,
                               stderr=subprocess.PIPE, text=True, timeout=300)
        expect("-o /dev/stdout redirected to a file: written in place, the same file",
               r.returncode == 0 and os.stat(redirected).st_ino == inode and open(redirected, "rb").read() == ir,
               "status %d, %s" % (r.returncode, r.stderr))

        # Refused before any work: a socket, a dangling link.
        sock_path = os.path.join(tmp, "sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(sock_path)
        r = compile_to(sock_path)
        expect("-o a socket is refused", r.returncode == 1 and
               "cannot write '%s': it is a socket [cannot-write]" % sock_path in r.stderr, r.stderr)
        s.close()
        os.symlink(os.path.join(tmp, "missing"), os.path.join(tmp, "dangling"))
        r = compile_to(os.path.join(tmp, "dangling"), "--emit=ir")
        expect("-o a dangling link is refused", r.returncode == 1 and
               "it is a symbolic link to a missing file [cannot-write]" in r.stderr and
               not os.path.exists(os.path.join(tmp, "missing")), r.stderr)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
