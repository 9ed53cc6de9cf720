"""samples/megatron_mlp.smp: a Megatron-style tensor-parallel block and its gradients.
All labels against JAX (f32, no loop: rtol 1e-4, atol 1e-5 leaves room for a few ulp of
reassociation in the matmuls and the psum)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap, iota

PROGRAM = "samples/megatron_mlp.smp"
m = twin.mesh("y", 4)


@smap(m, (P(), P(None, "y"), P("y", None)), P())
def mlp(x, w1, w2):
    h = jnp.maximum(x @ w1, 0.0)
    return jax.lax.psum(h @ w2, "y")


def objective(x, w1, w2):
    out = mlp(x, w1, w2)
    return jnp.sum(out * out)


def check(t):
    x = iota(8).reshape(2, 4) / 8.0 - 0.3
    w1 = twin.f32(jnp.sin(iota(32))).reshape(4, 8)
    w2 = twin.f32(jnp.cos(iota(32))).reshape(8, 4)
    t.close("out", mlp(x, w1, w2))
    gx, g1, g2 = jax.grad(objective, argnums=(0, 1, 2))(x, w1, w2)
    t.close("d/dx", gx)
    t.close("d/dw1", g1)
    t.close("d/dw2", g2)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
