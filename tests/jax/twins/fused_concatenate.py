"""tests/run/fused_concatenate.smp: leading-axis concatenations read by the loops that consume
them (two and three operands, with a trailing and a leading broadcast and a transpose, a zeros
operand, a result also read after its loop, i32 and bool, runs of 2^16 elements and more),
psum_scatter's step in a shmap's while loop, and a gradient through a concatenation:
jnp.concatenate, jax.lax.psum_scatter, jax.lax.fori_loop and jax.grad."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/fused_concatenate.smp"
m = twin.mesh("i", 2)


@smap(m, P("i"), P("i"))
def scatter_steps(x0):
    def step(_, x):
        y = jax.lax.psum_scatter(x, "i", scatter_dimension=0, tiled=True)
        return jnp.concatenate([y, y], axis=0) * 0.5
    return jax.lax.fori_loop(0, 3, step, x0)


def loss(x, w):
    return jnp.sum(jnp.concatenate([x, x * 2.0], axis=0) * w)


def iota(n, dtype=jnp.float32):
    return jnp.arange(n, dtype=dtype)


def check(t):
    a, b = iota(7) * 0.5, iota(5) - 2.0
    t.close("two", jnp.concatenate([a, b]) * 3.0 + 1.0)
    t.close("three", jnp.maximum(jnp.concatenate([b, a, b]), 0.5) - 0.25)
    r, q = iota(20).reshape(1, 20), (iota(12) * -1.0).reshape(1, 12)
    t.close("mid-row", jnp.concatenate([r, q], axis=1) + iota(32) * 0.125)
    top, bottom = iota(32).reshape(2, 16), (iota(48) * 0.25).reshape(3, 16)
    col = jnp.array([1.0, -1.0, 2.0, -2.0, 0.5]).reshape(5, 1)
    t.close("leading and transpose", jnp.concatenate([top, bottom]) * col + iota(80).reshape(16, 5).T)
    t.close("splat", jnp.concatenate([a, jnp.zeros(3)]) * 2.0 + 0.5)
    c = jnp.concatenate([b, a])
    t.close("stored", c)
    t.close("consumed", c * c - 1.0)
    i = iota(9, jnp.int32)
    t.equal("i32 and bool", jnp.concatenate([i, i * 3]) % 4 == 1)
    big = jnp.concatenate([iota(40001, jnp.int32) % 97, iota(30002, jnp.int32) % 89 * -2,
                           iota(999, jnp.int32)]) * 3 + 7
    t.equal("big, sum", jnp.sum(big))
    t.equal("big, across the runs", big[39998:40006])
    t.equal("big, the last run", big[70000:70006])
    bigf = jnp.concatenate([iota(65537) * 0.5, iota(131) * -0.25]) + 1.0
    t.close("big f32, across the runs", bigf[65533:65541])
    t.close("big f32, max", jnp.max(bigf))
    t.close("psum_scatter steps", scatter_steps(iota(16)))
    x, w = iota(5) + 1.0, iota(10) * 0.5 - 1.0
    t.close("loss", loss(x, w))
    t.close("grad", jax.grad(loss)(x, w))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
