"""Writes the .npy and .npz fixtures of the tests/run programs that load files (run it from
anywhere with /usr/bin/python3; the files are committed, this script says how they were made).
The archives np.savez writes carry the time of writing, so a rerun changes their bytes (not
their arrays)."""
import os
import struct
import zipfile

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(here, name)


# f64, big-endian, as some tools write them: [0.25, -1.5, 3.0, 1e-3]
np.save(path("values_f64_be.npy"), np.array([0.25, -1.5, 3.0, 1e-3], dtype=">f8"))
# i32 in Fortran order: arange(6).reshape(2, 3) * 7 - 10
np.save(path("ints_2x3_fortran.npy"),
        np.asfortranarray((np.arange(6).reshape(2, 3) * 7 - 10).astype(np.int32)))

# Sharded loads (npy_sharded.smp, grad_sharded_load.smp): an 8x4 f32 grid, in C order and in
# Fortran order.
grid = (np.arange(32, dtype=np.float32).reshape(8, 4) * 0.5 - 3).astype(np.float32)
np.save(path("grid_8x4.npy"), grid)
np.save(path("grid_8x4_fortran.npy"), np.asfortranarray(grid))

# Archives (npz_*.smp): np.savez stores its members (with zip64 local headers),
# np.savez_compressed deflates them.
arrays = dict(
    w=np.array([[0.5, -1.25, 2.0], [3.5, -0.75, 1e-3]], np.float32),
    n=np.array([3, -1, 4, 1, -5], np.int32),
    mask=np.array([True, False, False, True]),
    grid=grid,
)
np.savez(path("arrays.npz"), **arrays)
np.savez_compressed(path("arrays_compressed.npz"), **arrays)

# An archive cut in the middle: its end records are gone.
whole = open(path("arrays.npz"), "rb").read()
open(path("truncated.npz"), "wb").write(whole[:len(whole) // 2])

# A compressed archive whose CRC-32 of member w.npy is wrong (in the central directory, which
# readers trust, and in the local header): numpy refuses it with "Bad CRC-32 for file 'w.npy'".
data = bytearray(open(path("arrays_compressed.npz"), "rb").read())
info = zipfile.ZipFile(path("arrays_compressed.npz")).getinfo("w.npy")
bad = struct.pack("<I", info.CRC ^ 0x5A5A5A5A)
cd = data.index(b"PK\x01\x02")  # the first central directory entry
while True:
    name_len = struct.unpack_from("<H", data, cd + 28)[0]
    if data[cd + 46:cd + 46 + name_len] == b"w.npy":
        break
    cd = data.index(b"PK\x01\x02", cd + 4)
data[cd + 16:cd + 20] = bad
data[info.header_offset + 14:info.header_offset + 18] = bad
open(path("bad_crc.npz"), "wb").write(bytes(data))
try:
    np.load(path("bad_crc.npz"))["w"]
    raise SystemExit("bad_crc.npz: numpy read it")
except zipfile.BadZipFile as e:
    assert "CRC" in str(e), e
