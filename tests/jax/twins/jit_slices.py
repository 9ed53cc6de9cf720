"""tests/run/jit_slices.smp: slices of sharded dimensions computed on the local blocks (no
communication, a halo, or a masked sum), under jax.jit with the same shardings, values and
gradients. (u's 7 elements over x are uneven, which jax.jit refuses for a parameter: its
sharding goes on by with_sharding_constraint.)"""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax.numpy as jnp
import twin
from twin import jax, P, iota
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_slices.smp"
m = twin.mesh(("x", 2), ("y", 2))


def S(*spec):
    return NamedSharding(m, P(*spec))


interior = jax.jit(lambda a: a[1:7], in_shardings=S("x"), out_shardings=S("x"))
right_halo = jax.jit(lambda a: a[5:11], in_shardings=S("x"), out_shardings=S("x"))
left_halo = jax.jit(lambda a: a[0:12], in_shardings=S(("x", "y")), out_shardings=S(("x", "y")))
column = jax.jit(lambda c: c[:, 0], in_shardings=S("x", "y"), out_shardings=S("x"))
window = jax.jit(lambda c, u: (c[1:7, 2:6], jax.lax.with_sharding_constraint(u, S("x"))[1:6]),
                 in_shardings=(S("x", "y"), S()))
strided = jax.jit(lambda a, b: (a[0:8:2], b[5:16:2]), in_shardings=(S("x"), S(("x", "y"))))


# (the gradient of the unsharded functions: JAX's vjp of left_halo's sharding fails to run
# on host devices, "expected parameter 0 of size 16 (f32[4]) but got ... f32[3]")
def loss(a8, a12, a16, c, w, u):
    i, r, l, col = a8[1:7], a12[5:11], a16[0:12], c[:, 0]
    win, tail = w[1:7, 2:6], u[1:6]
    return (jnp.sum(i * i) + jnp.sum(jnp.sin(r)) + jnp.sum(l * jnp.cos(l)) + jnp.sum(col * col)
            + jnp.sum(jnp.tanh(win)) + jnp.sum(tail * tail) + jnp.sum(a8[0:8:2] * 3.0) + jnp.sum(a16[5:16:2] ** 2))


def check(t):
    a8 = iota(8) * 0.5
    a12 = jnp.cos(iota(12))
    a16 = iota(16) * 0.25
    c = iota(32).reshape(8, 4) * 0.1
    w = jnp.sin(iota(64).reshape(8, 8))
    u = iota(7) - 3.0
    t.close("interior", interior(a8))
    t.close("right_halo", right_halo(a12))
    t.close("left_halo", left_halo(a16))
    t.close("column", column(c))
    win, tail = window(w, u)
    t.close("window", win)
    t.close("tail", tail)
    s2, s3 = strided(a8, a16)
    t.close("strided", s2)
    t.close("strided b", s3)
    grads = jax.grad(loss, argnums=(0, 1, 2, 3, 4, 5))(a8, a12, a16, c, w, u)
    for label, g in zip(("grad a8", "grad a12", "grad a16", "grad c", "grad w", "grad u"), grads):
        t.close(label, g)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
