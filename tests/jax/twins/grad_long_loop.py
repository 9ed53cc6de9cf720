"""tests/run/grad_long_loop.smp: the gradient of a 2000-iteration loop (lax.fori_loop here).
Against JAX in f32 with rtol 2e-5 and atol 2e-5: 2000 f32 steps accumulate rounding that
differs between shmapc's loop and XLA's. How much: shmapc and JAX f32 are each within ~1e-5
of the float64 gradient (jax.grad of the same loop in f64, printed on failure), so they may
differ by about 2e-5. check_grads is recomputed with JAX's jvp/vjp along shmapc's directions
(fd in float64) and must give the printed verdict."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, f32


def f(x, w):
    def body(k, carry):
        acc, s = carry
        acc = acc + 0.001 * jnp.sin(acc * w + s)
        s = s * 0.999 + 0.001 * acc
        return acc, s
    acc, s = jax.lax.fori_loop(0, 2000, body, (x, jnp.zeros(3, x.dtype)))
    return jnp.sum(acc * acc) + jnp.sum(s)


PROGRAM = "tests/run/grad_long_loop.smp"


def check(t):
    x = f32([0.1, 0.2, -0.3])
    w = f32([1.5, 0.5, 2.0])
    metric = twin.check_grads_metric(f, [x, w])[0]
    t.equal("check_grads", metric < 0.01, how="JAX jvp/vjp vs float64 fd: %.2g" % metric)
    gx, gw = jax.grad(f, argnums=(0, 1))(x, w)
    with jax.enable_x64(True):
        gx64, gw64 = jax.grad(f, argnums=(0, 1))(x.astype(np.float64), w.astype(np.float64))
    how = "JAX f32 (float64: %s)" 
    t.close("d/dx", gx, rtol=2e-5, atol=2e-5, how=how % np.round(np.asarray(gx64), 6))
    t.close("d/dw", gw, rtol=2e-5, atol=2e-5, how=how % np.round(np.asarray(gw64), 6))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
