"""tests/run/grad_loop_sums.smp: gradients of replicated weights read inside loops by
device-varying code (a stacked weight's slice per iteration, a scan over it, a symmetrised
weight read whole in every iteration, a slice per iteration of a 100-iteration loop), which shmapc sums over the devices once after the
loop. Against JAX (shard_map over d=2, lax.fori_loop / lax.scan, jax.grad) with rtol 1e-4,
atol 1e-5."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/grad_loop_sums.smp"
m = twin.mesh("d", 2)
SPECS = ((P(), P("d")), P())


@smap(m, *SPECS)
def slices(w, x):
    def body(l, h):
        wl = jax.lax.dynamic_slice(w, (l, 0, 0), (1, 4, 4)).reshape(4, 4)
        return jnp.tanh(h @ wl)
    h = jax.lax.fori_loop(0, 3, body, x)
    return jax.lax.psum(jnp.sum(h * h), "d")


@smap(m, *SPECS)
def scanned(w, x):
    def layer(h, wl):
        h2 = jnp.tanh(h @ wl)
        return h2, jnp.sum(h2)
    h, s = jax.lax.scan(layer, x, w)
    return jax.lax.psum(jnp.sum(h * h) + jnp.sum(s * s), "d")


@smap(m, *SPECS)
def symmetric(w, x):
    h = jax.lax.fori_loop(0, 3, lambda l, h: jnp.tanh(h @ ((w + w.T) * 0.5)), x)
    return jax.lax.psum(jnp.sum(h * h), "d")


@smap(m, *SPECS)
def blocks(w, x):
    def body(l, h):
        wl = jax.lax.dynamic_slice(w, (l, 0), (1, 4)).reshape(4)
        return jnp.tanh(h * wl + 0.1)
    h = jax.lax.fori_loop(0, 100, body, x)
    return jax.lax.psum(jnp.sum(h * h), "d")


def check(t):
    shape = (3, 4, 4)
    w = (0.3 + np.indices(shape)[2] * 0.05 - np.indices(shape)[1] * 0.04 + np.indices(shape)[0] * 0.02)
    w = jnp.asarray(w, jnp.float32)
    x = jnp.asarray(np.arange(16).reshape(4, 4) * 0.1 - 0.5, jnp.float32)
    t.close("slices", jax.grad(slices)(w, x), rtol=1e-4, atol=1e-5)
    t.close("scanned", jax.grad(scanned)(w, x), rtol=1e-4, atol=1e-5)
    t.close("symmetric", jax.grad(symmetric)(w[1], x), rtol=1e-4, atol=1e-5)
    i, j = np.indices((100, 4))
    wb = jnp.asarray(0.9 + j * 0.02 + i * 0.001, jnp.float32)
    t.close("blocks", jax.grad(blocks)(wb, x), rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
