"""Writes the .npy files and .npz archives tests/unit/test_npy.cpp loads, with numpy itself
(the format's reference implementation) and Python's zipfile, into the directory given as
argv[1]; or, with `check DIR`, checks the files shm_save_npy and shm_save_npz wrote there.
Values follow one formula, a[i] = i * 0.5 - 3 over the C-order flat index (i * 3 - 7 for
integers, i % 2 == 1 for bools), which the C++ side recomputes on its own."""
import io
import os
import struct
import sys
import zipfile
import zlib

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
    write_headers(d)

    # Blocks (shm_load_npy_block): C order, Fortran order, big-endian, 3-D.
    save("blk_f32_8x4.npy", values((8, 4), np.float32))
    save("blk_i32_6x4_fortran.npy", np.asfortranarray(values((6, 4), np.int32)))
    save("blk_f64_4x6_be.npy", values((4, 6), np.float64).astype(">f8"))
    save("blk_f32_4x6x4.npy", values((4, 6, 4), np.float32))
    save("blk_f32_4x6x4_fortran.npy", np.asfortranarray(values((4, 6, 4), np.float32)))
    write_archives(d)


# Headers other writers produce, which numpy reads (checked below): each holds f32 [2, 3] with
# the values formula; and headers with one defect each, which numpy refuses too.
GOOD_HEADERS = {
    "hdr_double_quotes": '{"descr": "<f4", "fortran_order": False, "shape": (2, 3)}',
    "hdr_no_byte_order": "{'descr': 'f4', 'fortran_order': False, 'shape': (2, 3), }",
    "hdr_spaces": "{ 'descr' :  '<f4' ,\t'fortran_order' : False ,  'shape' : ( 2 , 3 ) }",
    "hdr_no_trailing_comma": "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
    "hdr_trailing_commas": "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3,),}",
    "hdr_key_order": "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}",
    "hdr_newlines": "{'descr': '<f4',\n 'fortran_order': False,\n 'shape': (2, 3)}",
    "hdr_name_descr": "{'descr': 'float32', 'fortran_order': False, 'shape': (2, 3)}",
    "hdr_python2_long": "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }",
    "hdr_parenthesised": "{'descr': ('<f4'), 'fortran_order': (False), 'shape': ((2, 3))}",
    "hdr_repeated_key": "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), 'descr': '<f4'}",
}
# Fortran order spelled True: the bytes are the transposed array's C order.
FORTRAN_HEADER = '{"descr":"<f4","fortran_order":True,"shape":(2,3)}'
BAD_HEADERS = {
    "hdr_missing_shape": "{'descr': '<f4', 'fortran_order': False}",
    "hdr_extra_key": "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}",
    "hdr_order_int": "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}",
    "hdr_order_lower": "{'descr': '<f4', 'fortran_order': false, 'shape': (2, 3)}",
    "hdr_shape_list": "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}",
    "hdr_shape_float": "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3)}",
    "hdr_not_dict": "['descr', 'fortran_order', 'shape']",
    "hdr_unclosed": "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)",
    "hdr_unterminated": "{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)}",
    "hdr_no_colon": "{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3)}",
}


def npy_with_header(header, data):
    """Version 1.0 bytes: magic, version, length, the header padded to 64 bytes, data."""
    text = header.encode("latin1")
    pad = (64 - (10 + len(text) + 1) % 64) % 64
    text += b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


def write_headers(d):
    a = values((2, 3), np.float32)
    for name, header in GOOD_HEADERS.items():
        path = os.path.join(d, name + ".npy")
        open(path, "wb").write(npy_with_header(header, a.astype("<f4").tobytes()))
        assert np.array_equal(np.load(path), a), name
    path = os.path.join(d, "hdr_fortran_true.npy")
    open(path, "wb").write(npy_with_header(FORTRAN_HEADER, a.astype("<f4").tobytes(order="F")))
    assert np.array_equal(np.load(path), a)
    for name, header in BAD_HEADERS.items():
        path = os.path.join(d, name + ".npy")
        open(path, "wb").write(npy_with_header(header, a.astype("<f4").tobytes()))
        try:
            np.load(path)
            raise SystemExit("numpy reads " + name)
        except Exception:  # ValueError, or tokenize's error for an unclosed brace
            pass


# The arrays of the archives: a f32 [2,3], b bool [5], c i32 [3,4], g f32 [8,4], f i32 [6,4]
# in Fortran order.
def archive_arrays():
    return dict(a=values((2, 3), np.float32), b=values((5,), np.bool_), c=values((3, 4), np.int32),
                g=values((8, 4), np.float32), f=np.asfortranarray(values((6, 4), np.int32)))


def npy_bytes(arr):
    f = io.BytesIO()
    np.lib.format.write_array(f, arr)
    return f.getvalue()


def zip64_archive(members):
    """A stored archive whose central directory gives every size and offset in zip64 extra
    fields, ended by zip64 end records (as zip tools write archives beyond 4 GiB)."""
    out, central = bytearray(), bytearray()
    for name, data in members:
        name = name.encode()
        crc, offset = zlib.crc32(data), len(out)
        extra = struct.pack("<HHQQ", 1, 16, len(data), len(data))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                           len(name), len(extra)) + name + extra + data
        extra = struct.pack("<HHQQQ", 1, 24, len(data), len(data), offset)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF,
                               0xFFFFFFFF, len(name), len(extra), 0, 0, 0, 0, 0xFFFFFFFF) + name + extra
    cd_offset, end64 = len(out), len(out) + len(central)
    out += central
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(members), len(members),
                       len(central), cd_offset)
    out += struct.pack("<IIQI", 0x07064B50, 0, end64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return bytes(out)


def write_archives(d):
    def p(name):
        return os.path.join(d, name)

    arrays = archive_arrays()
    np.savez(p("arrays.npz"), **arrays)
    np.savez_compressed(p("arrays_compressed.npz"), **arrays)
    stored = open(p("arrays.npz"), "rb").read()
    open(p("truncated.npz"), "wb").write(stored[:len(stored) // 2])
    open(p("not_zip.npz"), "wb").write(b"hello, world, this is not a zip archive\n")
    np.savez(p("empty.npz"))
    open(p("zip64.npz"), "wb").write(zip64_archive([("a.npy", npy_bytes(arrays["a"]))]))
    with zipfile.ZipFile(p("bzip2.npz"), "w", compression=zipfile.ZIP_BZIP2) as z:
        z.writestr("a.npy", npy_bytes(arrays["a"]))

    # Corrupt members: a flipped byte in the stored data of a; a wrong CRC-32 (central
    # directory and local header) for the deflated a; deflated data that is not deflate.
    def data_start(archive, info):  # after the local header, whose extra field differs
        name_len, extra_len = struct.unpack_from("<HH", archive, info.header_offset + 26)
        return info.header_offset + 30 + name_len + extra_len

    info = zipfile.ZipFile(p("arrays.npz")).getinfo("a.npy")
    data = bytearray(stored)
    data[data_start(stored, info) + info.file_size - 1] ^= 0x40  # in a's last element
    open(p("bad_crc_stored.npz"), "wb").write(bytes(data))
    deflated = bytearray(open(p("arrays_compressed.npz"), "rb").read())
    info = zipfile.ZipFile(p("arrays_compressed.npz")).getinfo("a.npy")
    bad = struct.pack("<I", info.CRC ^ 0xFFFF)
    crc_fixed = bytearray(deflated)
    crc_fixed[info.header_offset + 14:info.header_offset + 18] = bad
    cd = crc_fixed.index(b"PK\x01\x02")
    while crc_fixed[cd + 46:cd + 46 + 5] != b"a.npy":
        cd = crc_fixed.index(b"PK\x01\x02", cd + 4)
    crc_fixed[cd + 16:cd + 20] = bad
    open(p("bad_crc_deflated.npz"), "wb").write(bytes(crc_fixed))
    deflated[data_start(deflated, info)] = 0x07  # a final block of the reserved type 3
    open(p("corrupt_deflate.npz"), "wb").write(bytes(deflated))

    # 65535 members, the most an archive holds without zip64 records: Python's zipfile (under
    # np.savez) writes the count 0xFFFF in the end record and no zip64 records.
    np.savez(p("members_65535.npz"), **{"a%d" % i: np.int32(i * 3 - 7) for i in range(65535)})
    tail = open(p("members_65535.npz"), "rb").read()[-42:]
    assert tail[20:24] == b"PK\x05\x06" and tail[30:32] == b"\xff\xff" and b"PK\x06\x07" not in tail
    with np.load(p("members_65535.npz")) as f:
        assert len(f.files) == 65535 and f["a65534"] == 65534 * 3 - 7

    # The fixtures are what they claim: numpy reads the good ones and refuses the bad ones.
    for name in ("arrays.npz", "arrays_compressed.npz", "zip64.npz", "bzip2.npz"):
        with np.load(p(name)) as f:
            for key in f.files:
                assert np.array_equal(f[key], arrays[key]), (name, key)
    for name in ("bad_crc_stored.npz", "bad_crc_deflated.npz", "corrupt_deflate.npz"):
        try:
            np.load(p(name))["a"]
            raise SystemExit("numpy reads " + name)
        except (zipfile.BadZipFile, zlib.error):
            pass


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
    with np.load(os.path.join(d, "saved.npz")) as f:
        want = {"a": values((2, 3), np.float32), "b": values((5,), np.bool_),
                "c": values((3, 4), np.int32), "d": values((4,), np.float64), "s": np.float32(-3.0)}
        if f.files != list(want):
            print("KEYS", f.files)
            return 1
        for key, w in want.items():
            w = np.asarray(w)
            if f[key].dtype != w.dtype or f[key].shape != w.shape or not np.array_equal(f[key], w):
                print("MISMATCH saved.npz", key, f[key])
                return 1
    with zipfile.ZipFile(os.path.join(d, "saved.npz")) as z:
        if z.testzip() is not None or any(i.compress_type != zipfile.ZIP_STORED for i in z.infolist()):
            print("BAD ZIP saved.npz")
            return 1
    print("OK")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    write(sys.argv[1])
