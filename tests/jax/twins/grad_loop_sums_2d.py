"""tests/run/grad_loop_sums_2d.smp: two stacked Megatron MLP layers over a data x model mesh,
a loop over the layers reading each one's slice of the model-split weights; the weights'
gradients, which shmapc sums over "data" once after the loop. Against JAX (shard_map on the
same 2 x 2 mesh and specs, lax.fori_loop, jax.grad) with rtol 1e-4, atol 1e-5."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/grad_loop_sums_2d.smp"
m = twin.mesh(("data", 2), ("model", 2))


@smap(m, (P(None, None, "model"), P(None, "model", None), P("data")), P())
def loss(w1, w2, x):
    def body(l, h):
        a = jax.lax.dynamic_slice(w1, (l, 0, 0), (1, 4, 4)).reshape(4, 4)
        b = jax.lax.dynamic_slice(w2, (l, 0, 0), (1, 4, 4)).reshape(4, 4)
        return h + jax.lax.psum(jnp.tanh(h @ a) @ b, "model")
    h = jax.lax.fori_loop(0, 2, body, x)
    return jax.lax.psum(jnp.sum(h * h), "data")


def check(t):
    i1, i2 = np.indices((2, 4, 8)), np.indices((2, 8, 4))
    w1 = jnp.asarray(0.2 - i1[2] * 0.03 + i1[1] * 0.05 - i1[0] * 0.1, jnp.float32)
    w2 = jnp.asarray(0.1 + i2[1] * 0.02 - i2[2] * 0.04 + i2[0] * 0.05, jnp.float32)
    x = jnp.asarray(np.arange(16).reshape(4, 4) * 0.05 - 0.3, jnp.float32)
    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2, x)
    t.close("d/dw1", g1, rtol=1e-4, atol=1e-5)
    t.close("d/dw2", g2, rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
