"""tests/run/grad_inside_shmap.smp: jax.grad inside shard_map. With check_vma, JAX types the
replicated w as invariant, so its local gradient comes back psummed over "i" (the transpose
of the pvary that meets the sharded x) exactly as shmapc does: w2 = w - 0.1 * sum over
devices of the local gradients. Against JAX, rtol 1e-4, atol 1e-5 (one f32 step)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/grad_inside_shmap.smp"
m = twin.mesh("i", 4)


def local_loss(w, x):
    return jnp.mean(jnp.tanh(x @ w))


@smap(m, (P(), P("i")), (P(), P()))
def step(w, x):
    l, g = jax.value_and_grad(local_loss)(w, x)
    return w - 0.1 * g, jax.lax.pmean(l, "i")


@smap(m, (P(), P("i")), P())
def total(w, x):
    return jax.lax.psum(local_loss(w, x), "i")


def check(t):
    w = twin.normal((3, 2), 1)
    x = twin.uniform((8, 3), 2)
    w2, l = step(w, x)
    t.close("w2", w2)
    t.close("l", l)
    t.close("host", w - 0.1 * jax.grad(total)(w, x))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
