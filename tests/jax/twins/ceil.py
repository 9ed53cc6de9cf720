"""tests/run/ceil.smp: ceil of f32, f16 and f64 arrays, inside a shmap, and the gradient of a loss
through it (zero almost everywhere): jnp.ceil and jax.grad."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/ceil.smp"
m = twin.mesh(("X", 2))


@smap(m, P("X"), P("X"))
def ceil_blocks(x):
    return jnp.ceil(x * 2.0) + 1.0


def loss(x):
    return jnp.sum(jnp.ceil(x) * x) + jnp.sum(ceil_blocks(x) * x)


def check(t):
    x = jnp.arange(6, dtype=jnp.float32) * 0.75 - 2.0
    t.close("f32", jnp.ceil(x))
    t.close("f16", jnp.ceil(x.astype(jnp.float16) * jnp.float16(1.5)))
    t.close("f64", np.ceil(np.asarray(x, dtype=np.float64) / 3.0), how="numpy")  # (the twins run without x64)
    t.close("in a shmap", ceil_blocks(x))
    t.close("loss", loss(x))
    t.close("grad", jax.grad(loss)(x))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
