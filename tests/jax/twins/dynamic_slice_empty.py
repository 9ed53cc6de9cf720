"""tests/run/dynamic_slice_empty.smp: a dynamic_slice of size 0 (an empty block) and its zero
gradient, as lax.dynamic_slice gives them."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "tests/run/dynamic_slice_empty.smp"


def f(x):
    e = jax.lax.dynamic_slice(x, (1, 2), (0, 2))
    return jnp.sum(e) + jnp.sum(jax.lax.dynamic_slice(x, (2, 1), (1, 3)) * 2.0)


def check(t):
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    t.close("empty", jax.lax.dynamic_slice(x, (1, 2), (0, 2)))
    t.close("f", f(x))
    t.close("grad", jax.grad(f)(x))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
