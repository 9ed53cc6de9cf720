"""Writes the .npy fixtures of tests/run/dtypes_io.smp (i64 and f16 files; the files
are committed, this script says how they were made)."""
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
# f16, big-endian: [0.1, -2.5, 65504, 6e-08] rounded to float16 (0.0999756, -2.5, 65504, 5.96046e-08)
np.save(os.path.join(here, "halves_f16_be.npy"), np.array([0.1, -2.5, 65504.0, 6e-08], dtype=">f2"))
# i64 in Fortran order: (arange(6).reshape(2, 3) - 2) * 3000000000
np.save(os.path.join(here, "longs_2x3_fortran.npy"),
        np.asfortranarray(((np.arange(6).reshape(2, 3) - 2) * 3000000000).astype(np.int64)))
