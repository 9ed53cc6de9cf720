"""tests/run/jit_grad_reduce.smp: backward passes that reduce into the block each device keeps,
under jax.jit with the same shardings (and jax.shard_map for the shmap blk), values and
gradients. The rewrite changes what moves, never the values: these are JAX's."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax.numpy as jnp
import twin
from twin import jax, P, iota
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_grad_reduce.smp"

m = twin.mesh(("x", 2), ("y", 2))


def S(*spec):
    return NamedSharding(m, P(*spec))


def dense(d, w):
    return jnp.tanh(d @ w)


f = jax.jit(lambda a, w: jnp.exp(a * 0.1) @ w, in_shardings=(S("x", "y"), S("y", None)))
embed_loss = jax.jit(lambda table, tokens: jnp.sum(jnp.tanh(table[tokens])),
                     in_shardings=(S("x"), S("y")))
layer = jax.jit(dense, in_shardings=(S("x", None), S("x", None)))
sub = jax.jit(dense, in_shardings=(S(("x", "y"), None), S("x", None)))
partial = jax.jit(dense, in_shardings=(S("x", None), S(("x", "y"), None)))


@twin.smap(m, (P(("x", "y")), P("x", "y")), P(("x", "y")))
def blk(d, w):
    wf = twin.all_gather_invariant(twin.all_gather_invariant(w, "y", axis=1, tiled=True), "x",
                                   axis=0, tiled=True)
    return jnp.tanh(d @ wf)


def sq(g):
    def loss(d, w):
        y = g(d, w)
        return jnp.sum(y * y)
    return loss


def check(t):
    a = iota(16).reshape(8, 2) * 0.5
    w = jnp.cos(iota(16).reshape(2, 8))
    t.close("f", f(a, w))
    ga, gw = jax.grad(sq(f), argnums=(0, 1))(a, w)
    t.close("grad a", ga)
    t.close("grad w", gw)
    table = jnp.sin(iota(48).reshape(6, 8))
    tokens = (jnp.arange(12, dtype=jnp.int32) * 5 % 6).reshape(4, 3)
    t.close("embed_loss", embed_loss(table, tokens))
    t.close("grad table", jax.grad(embed_loss)(table, tokens))
    d = jnp.cos(iota(32).reshape(8, 4) * 0.3)
    lw = iota(16).reshape(4, 4) * 0.1
    t.close("layer", layer(d, lw))
    gd, glw = jax.grad(sq(layer), argnums=(0, 1))(d, lw)
    t.close("grad d", gd)
    t.close("grad layer w", glw)
    t.close("grad sub w", jax.grad(sq(sub), argnums=1)(d, lw))
    t.close("grad partial w", jax.grad(sq(partial), argnums=1)(d, lw))
    t.close("grad blk w", jax.jit(jax.grad(sq(blk), argnums=1))(d, lw))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
