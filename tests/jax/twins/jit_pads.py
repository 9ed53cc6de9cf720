"""tests/run/jit_pads.smp: padding and joining along a sharded dimension on the local blocks,
under jax.jit with the same shardings, values and gradients (u's uneven sharding put on by
with_sharding_constraint; gradients of the unsharded functions, which compute the same)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax.numpy as jnp
import twin
from twin import jax, P, iota
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_pads.smp"
m = twin.mesh(("x", 2), ("y", 2))


def S(*spec):
    return NamedSharding(m, P(*spec))


def padded_fn(a):
    return jnp.pad(a, (1, 1))


def shifted_fn(a):
    return jnp.concatenate([jnp.zeros(2, jnp.float32), a[0:6]])


def joined_fn(a, b):
    return jnp.concatenate([a, b * 2.0])


def framed_fn(c, u):
    return jnp.pad(c, ((1, 1), (0, 0)), constant_values=1.0), jnp.pad(u, (1, 1))


padded = jax.jit(padded_fn, in_shardings=S("x"), out_shardings=S("x"))
shifted = jax.jit(shifted_fn, in_shardings=S("x"), out_shardings=S("x"))
joined = jax.jit(joined_fn, in_shardings=(S("x"), S()), out_shardings=S("x"))


def loss(a, b, c, u):
    f, g = framed_fn(c, u)
    return (jnp.sum(padded_fn(a) ** 2 * iota(10)) + jnp.sum(jnp.sin(shifted_fn(a)) * iota(8))
            + jnp.sum(joined_fn(a, b) * iota(16)) + jnp.sum(jnp.tanh(f) * 2.0) + jnp.sum(g * iota(9)))


def check(t):
    a = iota(8) * 0.5 - 1.0
    b = jnp.cos(iota(8))
    c = iota(24).reshape(6, 4) * 0.1
    u = iota(7) + 1.0
    t.close("padded", padded(a))
    t.close("shifted", shifted(a))
    t.close("joined", joined(a, b))
    f, g = framed_fn(c, u)
    t.close("framed", f)
    t.close("framed u", g)
    grads = jax.grad(loss, argnums=(0, 1, 2, 3))(a, b, c, u)
    for label, gr in zip(("grad a", "grad b", "grad c", "grad u"), grads):
        t.close(label, gr)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
