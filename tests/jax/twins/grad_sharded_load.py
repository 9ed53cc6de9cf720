"""tests/run/grad_sharded_load.smp: the gradient of a loss whose shmap body reads its rows of
data/grid_8x4.npy with a sharded load (spec=P("batch", None)). A load is a constant to
autodiff, so JAX's twin passes the same file's rows in through in_specs=P("batch", None) and
differentiates with respect to w only. Against JAX, rtol 1e-5, atol 1e-6."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/grad_sharded_load.smp"
m = twin.mesh("batch", 4)
X = np.load(os.path.join(twin.ROOT, "tests", "run", "data", "grid_8x4.npy"))


@smap(m, (P(), P("batch", None)), P())
def loss(w, x):
    y = jnp.tanh(x @ w * 0.1)
    return jax.lax.pmean(jnp.mean(y * y), "batch")


def check(t):
    tol = dict(rtol=1e-5, atol=1e-6)
    w = twin.iota(8).reshape(4, 2) * twin.f32(0.1) - twin.f32(0.3)
    t.close("loss", loss(w, X), **tol)
    t.close("grad", jax.grad(loss)(w, X), **tol)
    v, g = jax.value_and_grad(loss)(w, X)
    t.close("value_and_grad value", v, **tol)
    t.close("value_and_grad grad", g, **tol)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
