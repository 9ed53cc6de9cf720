"""Writes the .npz data files of the samples, all float32 from seeded normal distributions:
 - moe.npz for samples/moe.smp: the activations a [32, 8] (32 tokens of width 8), the router's
   weights wg [8, 4], the four experts' weights w1 [4, 8, 16] and w2 [4, 16, 8], the regression
   target [32, 8], and the jvp's tangent directions ta [32, 8] and tw1 [4, 8, 16];
 - collective_matmuls.npz for samples/collective_matmuls.smp: the all-gather direction's
   activations a [8, 16] and initial weights w [16, 8], the reduce-scatter direction's t [8, 16]
   and w2 [16, 8], and the targets that training fits, y [8, 8] and y2 [8, 8].
Run: python3 samples/data/make_npz.py (numpy only; the outputs are committed, and this script
regenerates them byte for byte: the archives' entries carry a fixed date)."""
import io
import os
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def normals(seed, *shapes_and_scales):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape) * scale).astype(np.float32) for shape, scale in shapes_and_scales]


def moe():
    # Seed 2054: no token's second and third router probabilities come within 0.01 of each
    # other in the sample's six training steps, so the top-2 routing (a discontinuity) does not
    # depend on rounding and finite differences see a smooth function.
    names = ("a", "wg", "w1", "w2", "target", "ta", "tw1")
    return dict(zip(names, normals(2054, ((32, 8), 1), ((8, 4), 1), ((4, 8, 16), 0.3), ((4, 16, 8), 0.3),
                                   ((32, 8), 1), ((32, 8), 1), ((4, 8, 16), 1))))


def collective_matmuls():
    names = ("a", "w", "t", "w2", "y", "y2")
    return dict(zip(names, normals(2003, ((8, 16), 1), ((16, 8), 1), ((8, 16), 1), ((16, 8), 1),
                                   ((8, 8), 1), ((8, 8), 1))))


def write_npz(path, named):
    """numpy's savez, but with a fixed date on each entry so that the file is reproducible."""
    with zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_STORED) as z:
        for name, value in named.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(value), version=(1, 0))
            z.writestr(zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), buf.getvalue())
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    write_npz(os.path.join(HERE, "moe.npz"), moe())
    write_npz(os.path.join(HERE, "collective_matmuls.npz"), collective_matmuls())
