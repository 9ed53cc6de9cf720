"""tests/run/grad_dtypes.smp: gradients of bf16 and f16 programs, recomputed with JAX
in bf16 / f16 (on CPU JAX computes each bf16 / f16 operation in f32 and rounds its result, as
shmapc does; mean and sums accumulate in f32). The forward and backward passes round after
every operation, and JAX's backward pass is not operation for operation the same as shmapc's
(its transpose rules order some products and sums differently; its pmean over devices may add
in bf16), so values agree to a few units in the last place of the dtype: bf16 (8 significant
bits) rtol 3e-2, atol 2e-3; f16 (11 bits) rtol 4e-3, atol 1e-3. The linear case is exact."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/grad_dtypes.smp"
m = twin.mesh("batch", 4)
BF, F16 = jnp.bfloat16, jnp.float16
BF_TOL = dict(rtol=3e-2, atol=2e-3, how="JAX bf16")
F16_TOL = dict(rtol=4e-3, atol=1e-3, how="JAX f16")


@smap(m, (P(), P(), P("batch"), P("batch")), P())
def loss(w, b, inputs, targets):
    d = jnp.tanh(inputs @ w + b) - targets
    return jax.lax.pmean(jnp.mean(jnp.sum(d * d, axis=-1)), "batch")


def poly(x, y):
    return jnp.sum(x * y * 3.0 + jnp.exp(x) / (1.0 + y * y))


def linear(w):
    return jnp.sum(w * 3.0 - 1.0)


def check(t):
    w = (twin.normal((3, 2), 1) * 0.5).astype(BF)
    b = twin.f32([0.1, -0.2]).astype(BF)
    inputs = twin.uniform((8, 3), 2).astype(BF)
    targets = twin.normal((8, 2), 3).astype(BF)
    t.close("bf16 loss", jax.jit(loss)(w, b, inputs, targets).astype(jnp.float32), **BF_TOL)
    gw, gb = jax.jit(jax.grad(loss, argnums=(0, 1)))(w, b, inputs, targets)
    assert gw.dtype == BF and gb.dtype == BF
    t.close("bf16 d loss / d w", gw.astype(jnp.float32), **BF_TOL)
    t.close("bf16 d loss / d b", gb.astype(jnp.float32), **BF_TOL)
    x = twin.f32([0.5, -1.0, 2.0, 0.25]).astype(F16)
    y = twin.f32([1.5, 0.5, -0.75, 2.0]).astype(F16)
    v, (gx, gy) = jax.jit(jax.value_and_grad(poly, argnums=(0, 1)))(x, y)
    assert gx.dtype == F16
    t.close("f16 poly", v.astype(jnp.float32), **F16_TOL)
    t.close("f16 d poly / d x", gx.astype(jnp.float32), **F16_TOL)
    t.close("f16 d poly / d y", gy.astype(jnp.float32), **F16_TOL)
    _, tangent = jax.jit(lambda x, y, dx, dy: jax.jvp(poly, (x, y), (dx, dy)))(
        x, y, twin.f32([1, 0, 0, 0]).astype(F16), jnp.zeros(4, F16))
    t.close("f16 jvp along x0", tangent.astype(jnp.float32), **F16_TOL)
    t.close("bf16 d sum(3 w - 1) / d w (exactly 3)", jax.grad(linear)(w).astype(jnp.float32),
            rtol=0, atol=0, how="JAX bf16, exact")


if __name__ == "__main__":
    twin.main(PROGRAM, check)
