"""tests/run/jit_move_small_edges.smp: values moved at their smallest shape where blocks are
padded or loops nest, under jax.jit with the same shardings (v's uneven split along y, which
jax.jit refuses on a parameter, put on it by with_sharding_constraint), values and gradients."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax.numpy as jnp
import twin
from twin import jax, P, iota
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_move_small_edges.smp"

m = twin.mesh(("x", 2), ("y", 2))


def S(*spec):
    return NamedSharding(m, P(*spec))


uneven = jax.jit(lambda x, v: x * jax.lax.with_sharding_constraint(v, S("y")), in_shardings=(S(), S()),
                 out_shardings=S())
expanded = jax.jit(lambda x, v, w: x * v.astype(jnp.float32) + w, in_shardings=(S("x"), S("y"), S(None, "y")),
                   out_shardings=S("x"))


def nested_fn(h0, v):
    inner = lambda j, h: h * 0.5 + v.astype(jnp.float32).astype(jnp.float64)
    return jax.lax.fori_loop(0, 2, lambda k, h: jax.lax.fori_loop(0, 2, inner, h), h0)


def check(t):
    x = iota(21).reshape(3, 7)
    v = iota(7) - 2.0
    t.close("uneven", uneven(x, v))
    x4 = iota(32).reshape(4, 8) * 0.1
    w = iota(8).reshape(1, 8) * 2.0
    v16 = iota(8).astype(jnp.float16)
    t.close("expanded", expanded(x4, v16, w))
    with jax.enable_x64(True):  # (the program's nested loop is in f64)
        h = jnp.arange(32, dtype=jnp.float64).reshape(4, 8)
        vv = jnp.arange(32, dtype=jnp.float32).reshape(4, 8).astype(jnp.float16)
        nested = jax.jit(nested_fn, in_shardings=(S("x"), S("y")), out_shardings=S("x"))
        t.close("nested", nested(h, vv))
        t.close("grad h0", jax.grad(lambda h0: jnp.sum(nested(h0, vv)))(h))
    gx, gv = jax.grad(lambda x, v: jnp.sum(uneven(x, v) * x), argnums=(0, 1))(x, v)
    t.close("grad x", gx)
    t.close("grad v", gv)
    loss_expanded = jax.jit(lambda x, w: jnp.sum(expanded(x, v16, w) ** 2))
    ex, ew = jax.grad(loss_expanded, argnums=(0, 1))(x4, w)
    t.close("grad expanded x", ex)
    t.close("grad expanded w", ew)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
