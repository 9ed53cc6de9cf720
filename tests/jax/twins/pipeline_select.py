"""tests/run/pipeline_select.smp: a two-stage pipeline over 4 micro-batches whose loss selects
between two per-example values by a parameter's sign: its gradient, and the unpipelined grad of
the same loss, equal jax.grad on the whole batch (f32; rtol 1e-4, atol 1e-6)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "tests/run/pipeline_select.smp"


def loss(p, x):
    h = jnp.tanh(x @ p["w"])
    g = jnp.where(p["s"] > 0.0, h, h * 2.0)
    return jnp.mean(g * g)


def check(t):
    p = {"w": twin.normal((3, 6), 1), "s": twin.normal((6,), 2)}
    x = twin.normal((8, 3), 3)
    g = jax.grad(loss)(p, x)["w"][0]
    t.close("g", g, rtol=1e-4, atol=1e-6)
    t.close("whole", g, rtol=1e-4, atol=1e-6)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
