"""tests/run/jit_fwd_bwd.smp: a matmul partitioned with its backward pass's bytes weighed,
under jax.jit with the same shardings, values and gradients."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax.numpy as jnp
import twin
from twin import jax, P, iota
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_fwd_bwd.smp"
m = twin.mesh(("x", 2), ("y", 4))
dense = jax.jit(lambda a, w: jnp.exp(a * 0.1) @ w, in_shardings=(NamedSharding(m, P("x", "y")), NamedSharding(m, P())))


def loss(a, w):
    y = dense(a, w)
    return jnp.sum(y * y)


def check(t):
    a = jnp.cos(iota(64).reshape(8, 8))
    w = iota(32).reshape(8, 4) * 0.05
    t.close("dense", dense(a, w))
    t.close("dense_inference", dense(a, w))
    ga, gw = jax.grad(loss, argnums=(0, 1))(a, w)
    t.close("grad a", ga)
    t.close("grad w", gw)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
