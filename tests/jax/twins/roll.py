"""tests/run/roll.smp: roll along an axis, by negative and large shifts, flattened, of integers
and bools, in a shmap and in a jit function with the same shardings, and the gradient of a loss
through all of them: jnp.roll, jax.jit and jax.grad."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap
from jax.sharding import NamedSharding

PROGRAM = "tests/run/roll.smp"
m = twin.mesh(("X", 2), ("Y", 2))


@smap(m, P("X"), P("X"))
def roll_rows(x):
    return jnp.roll(x, 2, axis=1) * 2.0


roll_both = jax.jit(lambda a: (jnp.roll(a, -1, axis=1), jnp.roll(a, 3, axis=0)),
                    in_shardings=NamedSharding(m, P("X", None)))


def loss(x, w):
    a, b = roll_both(jnp.concatenate([x, x * 0.5], axis=0))
    return (jnp.sum(jnp.roll(x, 7, axis=1) * w) + jnp.sum(jnp.sin(roll_rows(x)) * w) + jnp.sum(a * b) * 0.1
            + jnp.sum(jnp.roll(x, -3) * w * w))


def check(t):
    x = (jnp.arange(24, dtype=jnp.float32) * 0.25 - 2.0).reshape(4, 6)
    t.close("axis 1 by 1", jnp.roll(x, 1, axis=1))
    t.close("axis 0 by -1", jnp.roll(x, -1, axis=0))
    t.close("axis 1 by 13", jnp.roll(x, 13, axis=1))
    t.close("flattened by 5", jnp.roll(x, 5))
    t.equal("i32 by -2", jnp.roll(jnp.arange(5, dtype=jnp.int32), -2))
    t.equal("bool by 1", jnp.roll(jnp.arange(4) < 1, 1))
    t.close("in a shmap", roll_rows(x))
    a, b = roll_both(jnp.concatenate([x, x * 0.5], axis=0))
    t.close("jit along the unsharded dimension", a)
    t.close("jit along the sharded dimension", b)
    w = jnp.cos(x)
    t.close("loss", loss(x, w))
    t.close("grad", jax.grad(loss)(x, w))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
