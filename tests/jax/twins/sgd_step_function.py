"""tests/run/sgd_step_function.smp: 60 SGD steps of a data-parallel least-squares loss, the
step a host function calling grad. Against JAX in f32. w and b: rtol 1e-4, atol 1e-5 (SGD
contracts, so rounding differences do not grow). The final loss, 1.8e-6, is a mean of squared
residuals of about 1e-3, each a difference of O(1) f32 numbers: an ulp of the inputs (6e-8)
moves a residual by 6e-5 of itself and the loss by about 1e-4 relative; rtol 1e-3 with
atol 1e-9."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/sgd_step_function.smp"
m = twin.mesh("batch", 2)


@smap(m, (P(), P(), P("batch"), P("batch")), P())
def loss(w, b, x, y):
    pred = jnp.sum(x * w, axis=1) + b
    return jax.lax.pmean(jnp.mean((pred - y) * (pred - y)), "batch")


@jax.jit
def sgd_step(w, b, x, y, lr):
    gw, gb = jax.grad(loss, argnums=(0, 1))(w, b, x, y)
    return w - lr * gw, b - lr * gb


def check(t):
    x = twin.uniform((8, 2), 4) * 2.0 - 1.0
    y = 2.0 * x[:, 0] - x[:, 1] + 0.5
    w = jnp.zeros(2, jnp.float32)
    b = jnp.float32(0.0)
    for step in range(60):
        w, b = sgd_step(w, b, x, y, 0.3)
    t.close("w", w)
    t.close("b", b)
    t.close("loss", loss(w, b, x, y), rtol=1e-3, atol=1e-9)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
