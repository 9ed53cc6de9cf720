#!/usr/bin/python3
"""Seeds for the loaders' fuzz target (tests/fuzz/fuzz_load.cpp): valid .npy files and .npz
archives of every kind numpy writes (each dtype the language loads, ranks 0-3, C and Fortran
order, big-endian, format versions 1 and 2, np.savez and np.savez_compressed, headers spelled
as other writers spell them), each behind the
request bytes that load it whole, and some as a block.

    /usr/bin/python3 tests/fuzz/make_load_seeds.py OUT_DIR"""
import io
import os
import sys

import numpy as np

CODES = {"float32": 0, "float64": 1, "int32": 2, "bool": 3, "int64": 4, "float16": 5}


def request(what, dtype, shape, start=None, block=None):
    b = bytes([what + 3 * CODES[np.dtype(dtype).name], len(shape)]) + bytes(shape)
    if what == 2:
        b += bytes(start) + bytes(block)
    return b


def npy_bytes(a, version=None):
    f = io.BytesIO()
    if version:
        np.lib.format.write_array(f, a, version=version)
    else:
        np.save(f, a)
    return f.getvalue()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    seeds = {}
    for dtype in CODES:
        for shape in [(), (3,), (2, 3), (2, 3, 2)]:
            a = (rng.standard_normal(shape) * 3).astype(dtype)
            name = "%s_%s" % (dtype, "x".join(map(str, shape)) or "scalar")
            seeds[name] = request(0, dtype, shape) + npy_bytes(a)
            if len(shape) >= 2:
                seeds[name + "_fortran"] = request(0, dtype, shape) + npy_bytes(np.asfortranarray(a))
                start, block = [1] + [0] * (len(shape) - 1), [1] + list(shape[1:])
                seeds[name + "_block"] = request(2, dtype, shape, start, block) + npy_bytes(a)
                seeds[name + "_fortran_block"] = request(2, dtype, shape, start, block) + npy_bytes(
                    np.asfortranarray(a))
            if np.dtype(dtype).itemsize > 1:
                seeds[name + "_big_endian"] = request(0, dtype, shape) + npy_bytes(a.astype(a.dtype.newbyteorder(">")))
            seeds[name + "_v2"] = request(0, dtype, shape) + npy_bytes(a, version=(2, 0))
            for compressed in (False, True):
                f = io.BytesIO()
                (np.savez_compressed if compressed else np.savez)(f, a=a, b=np.arange(5))
                seeds[name + ("_npz_deflated" if compressed else "_npz_stored")] = request(1, dtype, shape) + f.getvalue()
    # Headers in the other spellings numpy reads (tests/numpy/npy_fixtures.py's GOOD_HEADERS):
    # f32 [2, 3] behind each.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "numpy"))
    import npy_fixtures  # noqa: E402
    data = np.arange(6, dtype="<f4").tobytes()
    for hname, header in npy_fixtures.GOOD_HEADERS.items():
        seeds[hname] = request(0, "float32", (2, 3)) + npy_fixtures.npy_with_header(header, data)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(seeds), out))


if __name__ == "__main__":
    main()
