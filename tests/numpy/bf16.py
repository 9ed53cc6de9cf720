"""bfloat16 for numpy without ml_dtypes (Debian's numpy has none): a bfloat16 value is held
as the float32 whose low 16 bits are zero. round_bf16 rounds float32 values to it, to nearest
with ties to even, with integer operations (a NaN stays NaN); it is written from the
definition, independently of shmapc's runtime/abi/half.h, and tests/numpy/check_dtypes.py checks
it against ml_dtypes.bfloat16 where ml_dtypes is installed (the JAX venv)."""
import numpy as np


def round_bf16(x):
    """float32 values rounded to bfloat16, returned as float32 (of the same shape)."""
    x = np.asarray(x, dtype=np.float32)
    u = np.atleast_1d(x).view(np.uint32).astype(np.uint64)
    k = np.uint64  # no mixing with Python ints: numpy 1.24 would compute in float64
    r = ((u + k(0x7FFF) + ((u >> k(16)) & k(1))) >> k(16)) << k(16)
    out = (r & k(0xFFFFFFFF)).astype(np.uint32).view(np.float32).reshape(x.shape)
    return np.where(np.isnan(x), np.float32(np.nan), out).astype(np.float32)
