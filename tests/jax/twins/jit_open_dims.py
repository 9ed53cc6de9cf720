"""tests/run/jit_open_dims.smp: an open dimension never takes an axis another dimension of its
value uses, under jax.jit with the same shardings, values and gradients. JAX has no open
dimensions or priorities, so each function gets the shardings shmapc's propagation ends with:
the operands' written axes (an open dimension left unsharded) and the result's from the p0
operand (rows_later: P(None, "x"))."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax.numpy as jnp
import twin
from twin import jax, P, iota
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_open_dims.smp"


def S(mesh, *spec):
    return NamedSharding(mesh, P(*spec))


m = twin.mesh(("x", 2), ("y", 2))
xyz = twin.mesh(("x", 2), ("y", 2), ("z", 2))

rows_later = jax.jit(lambda a, b: a + b, in_shardings=(S(m, "x", None), S(m, None, "x")),
                     out_shardings=S(m, None, "x"))
other_operand = jax.jit(lambda a, b: a * b, in_shardings=(S(m, None, "x"), S(m, "x", None)),
                        out_shardings=S(m, None, "x"))
returned = jax.jit(lambda a: a, in_shardings=S(m, "x", None), out_shardings=S(m, None, "x"))
three_axes = jax.jit(lambda a, b: a - b * 0.5, in_shardings=(S(xyz, ("x", "y"), None), S(xyz, None, ("y", "z"))),
                     out_shardings=S(xyz, None, ("y", "z")))


def loss(a, b):
    s = rows_later(a, b)
    return jnp.sum(s * s) + jnp.sum(other_operand(a, b))


def loss3(a, b):
    d = three_axes(a, b)
    return jnp.sum(d * d)


def check(t):
    a = iota(16).reshape(4, 4)
    b = iota(16).reshape(4, 4) * 10.0
    t.close("f", rows_later(a, b))
    t.close("other_operand", other_operand(a, b))
    t.close("returned", returned(a))
    a8 = iota(64).reshape(8, 8) * 0.25
    b8 = jnp.cos(iota(64).reshape(8, 8))
    t.close("three_axes", three_axes(a8, b8))
    ga, gb = jax.grad(loss, argnums=(0, 1))(a, b)
    t.close("grad a", ga)
    t.close("grad b", gb)
    ga8, gb8 = jax.grad(loss3, argnums=(0, 1))(a8, b8)
    t.close("grad a8", ga8)
    t.close("grad b8", gb8)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
