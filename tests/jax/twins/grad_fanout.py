"""tests/run/grad_fanout.smp: implicit fan-out. The .expected file was
written by hand from this twin's values (shmapc printed t(f) = [0] and [1, 2, 3, 4] for both
gradients before the fix). Exact small integers: rtol 0, atol 1e-6."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap, f32

PROGRAM = "tests/run/grad_fanout.smp"
m = twin.mesh("i", 4)


@smap(m, P(), P("i"))
def f(x):
    return x


@smap(m, P("i"), P("i"))
def total(x):
    return jax.lax.psum(x, "i")


def weighted_total(x):
    return jnp.sum(total(x) * f32([1.0, 2.0, 3.0, 4.0]))


def check(t):
    exact = dict(rtol=0, atol=1e-6)
    t.close("f", f(f32([5.0])), **exact)
    # transpose(f)(ct): f is linear in x: f32[1] (its declared block type, times P()).
    (tf,) = jax.linear_transpose(f, jax.ShapeDtypeStruct((1,), jnp.float32))(f32([0, 1, 2, 3]))
    t.close("t(f)", tf, **exact)
    x = f32([1.0, 2.0, 3.0, 4.0])
    t.close("total", total(x), **exact)
    t.close("grad weighted_total", jax.grad(weighted_total)(x), **exact)
    _, pullback = jax.vjp(total, x)
    t.close("vjp total", pullback(f32([1.0, 2.0, 3.0, 4.0]))[0], **exact)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
