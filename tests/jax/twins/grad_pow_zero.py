"""tests/run/grad_pow_zero.smp: derivatives of a ** b at a = 0 (JAX's rule for lax.pow: d/db
is log(a) a^b with log(a) read as 0 where a is 0; d/da is b a^(b - 1)), against jax.grad and
jax.jvp, NaN and infinities included (equal_nan)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "tests/run/grad_pow_zero.smp"


def check(t):
    a = jnp.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.5], jnp.float32)
    b = jnp.array([0.0, 1.0, 2.0, 0.5, 3.0, -1.0, 3.0, 2.0], jnp.float32)
    ga, gb = jax.grad(lambda a, b: jnp.sum(a ** b), argnums=(0, 1))(a, b)
    t.close("d/da", ga)
    t.close("d/db", gb)
    zero_to = lambda b: jnp.sum(jnp.zeros(5, jnp.float32) ** b)
    y, tangent = jax.jvp(zero_to, (b[:5],), (jnp.ones(5, jnp.float32),))
    t.close("0^b", y)
    t.close("jvp along b", tangent)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
