"""samples/collective_matmul_grad.smp: the gradient of How To Scale Your Model's collective matmul
(ppermute in a loop) and of its all_gather version. Against JAX (f32; rtol 1e-4, atol 1e-5:
a 3-iteration loop of small matmuls, a few ulp). The printed difference between the two
versions is 0 in the program; JAX's two versions differ by at most an ulp or two, so that
label is checked with atol 1e-6."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap, iota

PROGRAM = "samples/collective_matmul_grad.smp"
m = twin.mesh(("x", 2), ("y", 4))
PERM = [(0, 3), (1, 0), (2, 1), (3, 2)]


@smap(m, (P("x", "y"), P(None, "y")), P("x", "y"))
def matmul_allgather(lhs, rhs):
    return jax.lax.all_gather(lhs, "y", axis=1, tiled=True) @ rhs


@smap(m, (P("x", "y"), P(None, "y")), P("x", "y"))
def matmul_collective(lhs, rhs):
    me = jax.lax.axis_index("y")
    accum = jnp.zeros((2, 1), jnp.float32)
    for i in range(3):  # the .smp's `for i in range(3)`, unrolled by Python
        chunk = jax.lax.dynamic_slice(rhs, (((me + i) % 4) * 2, jnp.int32(0)), (2, 1))
        accum = accum + lhs @ chunk
        lhs = jax.lax.ppermute(lhs, "y", perm=PERM)
    return accum + lhs @ jax.lax.dynamic_slice(rhs, (((me - 1) % 4) * 2, jnp.int32(0)), (2, 1))


def loss_allgather(a, w):
    out = matmul_allgather(a, w)
    return jnp.sum(out * out)


def loss_collective(a, w):
    out = matmul_collective(a, w)
    return jnp.sum(out * out)


def check(t):
    a = iota(32).reshape(4, 8) / 32.0
    w = iota(32).reshape(8, 4) / 16.0 - 1.0
    ga, gw = jax.jit(jax.grad(loss_collective, argnums=(0, 1)))(a, w)
    ra, rw = jax.jit(jax.grad(loss_allgather, argnums=(0, 1)))(a, w)
    t.close("d/da", ga)
    t.close("d/dw", gw)
    diff = jnp.maximum(jnp.max(jnp.abs(ga - ra)), jnp.max(jnp.abs(gw - rw)))
    t.close("max abs difference to the all_gather version", diff, rtol=0, atol=1e-6)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
