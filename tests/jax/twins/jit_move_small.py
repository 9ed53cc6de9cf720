"""tests/run/jit_move_small.smp: a value moved at its smallest shape (a broadcast's operand, a
widening convert's), a value used in two shardings moved to the second from the first's block, a
splat made again rather than moved, a loop's constant moved once before the loop (a for loop's,
a while loop's); under jax.jit with the same shardings, values and gradients."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax.numpy as jnp
import twin
from twin import jax, P, iota
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_move_small.smp"

m = twin.mesh(("x", 2), ("y", 2))


def S(*spec):
    return NamedSharding(m, P(*spec))


scaled = jax.jit(lambda x, v: x * v, in_shardings=(S("x"), S("y")), out_shardings=S("x"))
widened = jax.jit(lambda x, v: x * v.astype(jnp.float32), in_shardings=(S("x"), S("y")), out_shardings=S("x"))
def two_uses(a):
    s = jnp.sin(a)
    return s * 2.0, s + 1.0


whole_then_split = jax.jit(two_uses, in_shardings=S("x"), out_shardings=(S(), S(None, "y")))
split_then_whole = jax.jit(two_uses, in_shardings=S("x"), out_shardings=(S(None, "y"), S()))
splat_twice = jax.jit(lambda a, b: (a * jnp.full((4, 8), 1.5, jnp.float32), b * jnp.full((4, 8), 1.5, jnp.float32)),
                      in_shardings=(S("x"), S()), out_shardings=(S("x"), S()))
looped = jax.jit(lambda h0, b: jax.lax.fori_loop(0, 3, lambda k, h: jnp.tanh(h + b), h0),
                 in_shardings=(S("x"), S("y")), out_shardings=S("x"))

shrunk = jax.jit(lambda h0, b: jax.lax.while_loop(lambda h: jnp.sum(h * b) > 1.0, lambda h: (h - b) * 0.5, h0),
                 in_shardings=(S("x"), S("y")), out_shardings=S("x"))


def loss(x, v, w):
    s = scaled(x, v)
    p, q = whole_then_split(s)
    r, t = split_then_whole(x)
    c, d = splat_twice(s, x)
    return (jnp.sum(c * d) + jnp.sum(s * s) + jnp.sum(widened(x, w) * x) + jnp.sum(p * q) + jnp.sum(r * jnp.cos(t))
            + jnp.sum(looped(x, s)))


def check(t):
    x = iota(32).reshape(4, 8) * 0.125
    v = iota(8) - 3.0
    w = (iota(32).reshape(4, 8) * 0.5).astype(jnp.float16)
    t.close("scaled", scaled(x, v))
    t.close("widened", widened(x, w))
    p, q = whole_then_split(x)
    t.close("whole_then_split whole", p)
    t.close("whole_then_split split", q)
    r, s = split_then_whole(x)
    t.close("split_then_whole split", r)
    t.close("split_then_whole whole", s)
    c, d = splat_twice(x, x * v)
    t.close("splat_twice rows", c)
    t.close("splat_twice whole", d)
    t.close("looped", looped(x, x * 0.5))
    t.close("shrunk", shrunk(x, x * 0.25))
    # (loss under jax.jit: looped's b, s, comes in x's sharding, which jit then moves)
    gx, gv, gw = jax.grad(jax.jit(loss), argnums=(0, 1, 2))(x, v, w)
    t.close("grad x", gx)
    t.close("grad v", gv)
    t.close("grad w", gw.astype(jnp.float32), rtol=2e-3, atol=1e-2)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
