"""tests/run/grad_rem_floordiv.smp: gradients of numpy-style % and //. jnp's % and
// are numpy's (floor division, remainder with the divisor's sign), and JAX differentiates
them as the .smp says: d(a % b) = da - floor(a / b) db, and // and floor have gradient 0.
Against JAX: the gradients are small integers (rtol 0, atol 1e-6); the check_grads verdicts
by check_grads' metric (JAX jvp/vjp vs float64 fd); the f64 line with JAX in float64."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, f32

PROGRAM = "tests/run/grad_rem_floordiv.smp"


def rem_both(a, b):
    return jnp.sum(a % b * a + b % 0.8)


def floordiv(a, b):
    return jnp.sum((a // b) * a + jnp.floor(a) * b)


def rem_sum(a, b):
    return jnp.sum(a % b)


def floordiv_sum(a, b):
    return jnp.sum(a // b + jnp.floor(a * b))


def check(t):
    a = f32([-3.7, -3.2, 1.1, 2.9, 5.3])
    b = f32([1.5, -2.0, 0.7, -1.1, 2.5])
    for label, f in [("check_grads a % b", rem_both), ("check_grads a // b", floordiv)]:
        metric = twin.check_grads_metric(f, [a, b])[0]
        t.equal(label, metric < 0.01, how="JAX jvp/vjp vs float64 fd: %.2g" % metric)
    exact = dict(rtol=0, atol=1e-6)
    ga, gb = jax.grad(rem_sum, argnums=(0, 1))(a, b)
    t.close("d/da sum(a % b)", ga, **exact)
    t.close("d/db sum(a % b)", gb, **exact)
    fa, fb = jax.grad(floordiv_sum, argnums=(0, 1))(a, b)
    t.close("d/da sum(a // b + floor(a * b))", fa, **exact)
    t.close("d/db sum(a // b + floor(a * b))", fb, **exact)
    with jax.enable_x64(True):
        _, db = jax.grad(rem_sum, argnums=(0, 1))(a.astype(np.float64), b.astype(np.float64))
    t.close("f64 d/db sum(a % b)", db, how="JAX float64", **exact)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
