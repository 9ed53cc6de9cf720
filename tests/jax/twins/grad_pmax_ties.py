"""tests/run/grad_pmax_ties.smp: gradients of pmax and pmin with ties.
JAX has no differentiation rule for pmax/pmin ("Differentiation rule for 'pmax' not
implemented"), so the forward values are checked against JAX's shard_map and the gradients
against float64 central finite differences of the same function in numpy. At a tie the
central difference is the mean of the one-sided derivatives, i.e. the cotangent shared
equally among the tied devices, which is what shmapc documents (docs/language.md). The
inputs are small integers and the function is piecewise linear, so the differences are exact
up to float64 rounding: rtol 0, atol 1e-6."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap, f32

PROGRAM = "tests/run/grad_pmax_ties.smp"
m = twin.mesh("i", 4)
W = np.array([[1.0], [10.0]])


@smap(m, P(None, "i"), P())
def top(x):
    return jax.lax.pmax(x, "i")


@smap(m, P(None, "i"), P())
def bottom(x):
    return jax.lax.pmin(x, "i")


def check(t):
    x = f32([[1.0, 5.0, 1.0, 5.0],
             [2.0, 3.0, 9.0, 4.0]])  # column d is device d's block
    exact = dict(rtol=0, atol=1e-6)
    t.close("pmax", top(x), **exact)
    t.close("pmin", bottom(x), **exact)
    # weighted_top(x) = sum(pmax(x) * w), in numpy: the max over the device axis (columns).
    fd = "float64 central differences (JAX: no pmax/pmin gradient)"
    t.close("d/dx sum(w * pmax)", twin.fd_grad(lambda x: np.sum(x.max(1, keepdims=True) * W), [x]),
            how=fd, **exact)
    t.close("d/dx sum(w * pmin)", twin.fd_grad(lambda x: np.sum(x.min(1, keepdims=True) * W), [x]),
            how=fd, **exact)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
