"""Writes the .npy fixtures of the tests/run programs that load files (run it from anywhere;
the files are committed, this script says how they were made)."""
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
# f64, big-endian, as some tools write them: [0.25, -1.5, 3.0, 1e-3]
np.save(os.path.join(here, "values_f64_be.npy"), np.array([0.25, -1.5, 3.0, 1e-3], dtype=">f8"))
# i32 in Fortran order: arange(6).reshape(2, 3) * 7 - 10
np.save(os.path.join(here, "ints_2x3_fortran.npy"),
        np.asfortranarray((np.arange(6).reshape(2, 3) * 7 - 10).astype(np.int32)))
