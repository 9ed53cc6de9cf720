"""samples/jit_layers.smp: the jit functions under jax.jit with the same shardings (NamedSharding
on a 2 x 2 mesh of host devices), values and gradients (f32: rtol 1e-4, atol 1e-5 leaves room
for reassociation in the partitioned matmuls and psums)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, iota
from jax.sharding import NamedSharding

PROGRAM = "samples/jit_layers.smp"
m = twin.mesh(("X", 2), ("Y", 2))


def S(*spec):
    return NamedSharding(m, P(*spec))


layer = jax.jit(lambda x, w: x @ w, in_shardings=(S("X", "Y"), S("Y", None)), out_shardings=S("X", None))


def mlp_loss_fn(x, w1, w2):
    h = jnp.tanh(x @ w1)
    y = h @ w2
    return jnp.mean(y * y)


mlp_loss = jax.jit(mlp_loss_fn, in_shardings=(S("X", None), S(None, "Y"), S("Y", None)), out_shardings=S())
add_moved = jax.jit(lambda a, b: a + b, in_shardings=(S("X", None), S("Y", None)))


def constrained_fn(w_out, w_in, x):
    hidden = jnp.einsum("fd,bd->bf", w_in, x)
    hidden = jax.lax.with_sharding_constraint(hidden, S("X", "Y"))
    return jnp.einsum("df,bf->bd", w_out, hidden)


constrained = jax.jit(constrained_fn, in_shardings=(S(), S(), S("X", None)))
relayout = jax.jit(lambda a: a * 2.0, in_shardings=S("X", None), out_shardings=S(None, "X"))
down = jax.jit(lambda t, w: t @ w, in_shardings=(S("X", "Y"), S("Y", None)), out_shardings=S("X", "Y"))
shard_means = jax.jit(lambda a: jnp.mean(a.reshape(2, 4, 4), axis=1), in_shardings=S("X", "Y"),
                      out_shardings=S("X", "Y"))


collective_baseline = jax.jit(lambda lhs, rhs: lhs @ rhs, in_shardings=(S("X", "Y"), S(None, "Y")),
                              out_shardings=S("X", "Y"))
block = jax.jit(lambda inp, w_in, w_out: jnp.tanh(inp @ w_in) @ w_out,
                in_shardings=(S("X", "Y"), S(None, "Y"), S("Y", None)), out_shardings=S("X", "Y"))


def moe_fn(w, a, b):
    mask = jax.nn.one_hot(b, 4).T
    out = (mask[:, :, None] * a[None]) @ w
    return jnp.sum(mask[:, :, None] * out, axis=0)


moe = jax.jit(moe_fn, in_shardings=(S("X", None, "Y"), S("X", "Y"), S("X")))


def check(t):
    x = iota(128).reshape(8, 16) * 0.01
    w = iota(512).reshape(16, 32) * 0.001 - 0.2
    w2 = iota(128).reshape(32, 4) * 0.01 - 0.6
    t.close("layer row 0", layer(x, w)[0])
    t.close("loss", mlp_loss(x, w, w2))
    g1, g2 = jax.grad(mlp_loss, argnums=(1, 2))(x, w, w2)
    t.close("grad w1 row 3", g1[3])
    t.close("grad w2", g2)
    a = iota(32).reshape(8, 4)
    t.close("moved", add_moved(a, a * 10.0))
    w_in = iota(512).reshape(32, 16) * 0.002 - 0.5
    t.close("constrained row 5", constrained(w, w_in, x)[5])
    t.close("shard means", shard_means(a * a))
    t.close("relayout", relayout(a))
    t.close("down row 3", down(iota(256).reshape(8, 32) * 0.01, w_in * 2.0)[3])
    t.close("collective baseline row 2", collective_baseline(x, w)[2])
    t.close("block row 6", block(x, w, w.T * 0.5)[6])
    we = jnp.sin(iota(512).reshape(4, 8, 16))
    ae = jnp.cos(iota(64).reshape(8, 8))
    t.close("moe", moe(we, ae, (jnp.arange(8, dtype=jnp.int32) * 3) % 4))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
