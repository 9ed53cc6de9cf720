"""Writes the .npy files tests/unit/test_npy.cpp loads, with numpy itself (the format's
reference implementation), into the directory given as argv[1]; or, with `check DIR`, checks
the files shm_save_npy wrote there. Values follow one formula, a[i] = i * 0.5 - 3 over the
C-order flat index (i % 2 == 1 for bools), which the C++ side recomputes on its own."""
import os
import sys

import numpy as np


def values(shape, dtype):
    n = int(np.prod(shape))
    i = np.arange(n)
    if dtype == np.bool_:
        return (i % 2 == 1).reshape(shape)
    if np.issubdtype(dtype, np.integer):
        return (i * 3 - 7).astype(dtype).reshape(shape)
    return (i * 0.5 - 3).astype(dtype).reshape(shape)


def write(d):
    def save(name, arr, **kw):
        np.save(os.path.join(d, name), arr, **kw)

    save("f32_2x3.npy", values((2, 3), np.float32))
    save("f64_big_endian.npy", values((4,), np.float64).astype(">f8"))
    save("i32_fortran.npy", np.asfortranarray(values((3, 4), np.int32)))
    save("f32_fortran_3d.npy", np.asfortranarray(values((2, 3, 4), np.float32)))
    save("bool_5.npy", values((5,), np.bool_))
    save("f32_scalar.npy", np.float32(-3.0))
    with open(os.path.join(d, "f32_v2.npy"), "wb") as f:
        np.lib.format.write_array(f, values((2, 3), np.float32), version=(2, 0))
    with open(os.path.join(d, "f32_v3.npy"), "wb") as f:
        np.lib.format.write_array(f, values((2, 3), np.float32), version=(3, 0))
    save("i64_2x3.npy", values((2, 3), np.int64))
    save("f32_3x2.npy", values((3, 2), np.float32))
    save("structured.npy", np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    good = open(os.path.join(d, "f32_2x3.npy"), "rb").read()
    open(os.path.join(d, "truncated.npy"), "wb").write(good[:-5])
    open(os.path.join(d, "trailing.npy"), "wb").write(good + b"xx")
    open(os.path.join(d, "not_npy.npy"), "wb").write(b"hello, world\n")
    open(os.path.join(d, "short.npy"), "wb").write(good[:7])
    open(os.path.join(d, "bad_header.npy"), "wb").write(good.replace(b"'shape'", b"'shapf'"))
    os.mkdir(os.path.join(d, "a_directory.npy"))


def check(d):
    for name, shape, dtype in [("saved_f32.npy", (2, 3), np.float32),
                               ("saved_f64.npy", (4,), np.float64),
                               ("saved_i32.npy", (3, 4), np.int32),
                               ("saved_bool.npy", (5,), np.bool_),
                               ("saved_scalar.npy", (), np.float32)]:
        a = np.load(os.path.join(d, name))
        want = values(shape, dtype) if shape else np.float32(-3.0)
        if a.dtype != want.dtype or a.shape != want.shape or not np.array_equal(a, want):
            print("MISMATCH", name, a.dtype, a.shape, a)
            return 1
        with open(os.path.join(d, name), "rb") as f:
            if f.read(8) != b"\x93NUMPY\x01\x00":
                print("NOT VERSION 1", name)
                return 1
    print("OK")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    write(sys.argv[1])
