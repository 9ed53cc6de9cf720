"""tests/run/sorting.smp: argsort (stable, NaN last), sort, top_k, take_along_axis, and the
gradient of a loss through top_k and sort. Against JAX (f32; rtol 1e-4, atol 1e-5)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, iota

PROGRAM = "tests/run/sorting.smp"
W = jnp.arange(1, 13, dtype=jnp.float32).reshape(3, 4)


def loss(x):
    v, _ = jax.lax.top_k(x, 2)
    return jnp.sum(v * v) + jnp.sum(jnp.sort(x, axis=0) * W)


def check(t):
    x = jnp.sin(iota(12).reshape(3, 4) * 2.1) * 3.0
    t.equal("argsort", jnp.argsort(x, stable=True))
    t.equal("argsort axis 0", jnp.argsort(x, axis=0, stable=True))
    t.close("sort", jnp.sort(x))
    t.equal("stable ties", jnp.argsort(jnp.array([2, 1, 2, 1, 0]), stable=True))
    t.equal("NaN last", jnp.argsort(jnp.log(jnp.array([2.0, -1.0, 0.5])), stable=True))
    v, i = jax.lax.top_k(x, 2)
    t.close("top_k values", v)
    t.equal("top_k indices", i)
    t.close("take_along_axis", jnp.take_along_axis(x, jnp.array([[3, 0], [1, -1], [2, 2]]), axis=1))
    t.close("grad", jax.grad(loss)(x))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
