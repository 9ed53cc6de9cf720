"""tests/run/grad_combine_variance.smp: a Megatron MLP on a 2 x 2 data x model mesh whose
model-split weights' (w1, w2) and replicated bias's (b) gradient sums over "data" shmapc joins
in one psum2 of different variance. The loss, the three gradients and the loss after one SGD
step against JAX (shard_map on the same mesh and specs, jax.value_and_grad), rtol 1e-4,
atol 1e-5."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/grad_combine_variance.smp"
m = twin.mesh(("data", 2), ("model", 2))


@smap(m, (P("data"), P(None, "model"), P("model", None), P()), P())
def loss(x, w1, w2, b):
    h = jnp.tanh(x @ w1)
    y = jax.lax.psum(h @ w2, "model") + b
    return jax.lax.psum(jnp.sum(y * y), "data")


def check(t):
    tol = dict(rtol=1e-4, atol=1e-5)
    x = jnp.asarray(np.arange(16).reshape(4, 4) * 0.1 - 0.7, jnp.float32)
    i1, i2 = np.indices((4, 8)), np.indices((8, 4))
    w1 = jnp.asarray(0.3 - i1[1] * 0.05 + i1[0] * 0.07, jnp.float32)
    w2 = jnp.asarray(0.2 + i2[0] * 0.03 - i2[1] * 0.06, jnp.float32)
    b = jnp.asarray([0.1, -0.2, 0.3, -0.4], jnp.float32)
    value, (g1, g2, gb) = jax.value_and_grad(loss, argnums=(1, 2, 3))(x, w1, w2, b)
    t.close("loss", value, **tol)
    t.close("d/dw1", g1, **tol)
    t.close("d/dw2", g2, **tol)
    t.close("d/db", gb, **tol)
    t.close("loss after a step", loss(x, w1 - g1 * 0.1, w2 - g2 * 0.1, b - gb * 0.1), **tol)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
