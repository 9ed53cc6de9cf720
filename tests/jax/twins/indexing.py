"""tests/run/indexing.smp: take / x[idx], scatter_add, argmax / argmin, cumsum, one_hot, clip
and their gradients (gather <-> scatter_add, cumsum <-> reversed cumsum), and an embedding
lookup inside shard_map (replicated table, sharded ids) whose table gradient is all-reduced.
Against JAX (f32; rtol 1e-4, atol 1e-5)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap, iota

PROGRAM = "tests/run/indexing.smp"
m = twin.mesh("i", 2)


@smap(m, (P(), P("i")), P("i"))
def embed(table, ids):
    return jnp.take(table, ids, axis=0)


def loss(x, v):
    g = jnp.take(x, jnp.array([2, 0, 2]), axis=1)
    s = jnp.zeros(5, jnp.float32).at[jnp.array([1, 3, 1])].add(v)
    return (jnp.sum(g * g) + jnp.sum(s * s * s) + jnp.sum(jnp.cumsum(x, axis=0) * x)
            + jnp.sum(x[jnp.array([1, 0])] * 2.0))


def embed_loss(table):
    e = embed(table, jnp.array([4, 0, 4, 2], jnp.int32))
    return jnp.sum(e * e * e)


def check(t):
    x = iota(12).reshape(3, 4) / 10.0 - 0.3
    v = jnp.array([0.5, -1.0, 2.0], jnp.float32)
    t.close("take", jnp.take(x, jnp.array([2, 0, -1]), axis=1, mode="wrap"))
    t.close("take flat", jnp.take(x.reshape(-1), jnp.array([11, 0])))
    t.close("x[idx]", x[jnp.array([2, 2, 0])])
    t.close("x[:, idx]", x[:, jnp.array([3, 1])])
    t.close("scatter_add", jnp.zeros(5, jnp.float32).at[jnp.array([1, 3, 1])].add(v))
    t.close("x.at[idx].add", jnp.asarray(x).at[jnp.array([2, 0, 2])].add(jnp.ones((3, 4), jnp.float32)))
    t.close("x.at[:, idx].add", jnp.asarray(x).at[:, jnp.array([3, -1])].add(x[:, jnp.array([0, 1])]))
    t.equal("argmax", jnp.argmax(x, axis=1))
    t.equal("argmin", jnp.argmin(x, axis=0))
    t.equal("argmax flat", jnp.argmax(jnp.array([1.0, 5.0, 5.0, -2.0])))
    t.close("cumsum", jnp.cumsum(x, axis=1))
    t.equal("cumsum flat", jnp.cumsum(jnp.array([1, 2, 3, 4])))
    t.close("one_hot", jax.nn.one_hot(jnp.array([0, 2, 5, -1]), 3))
    t.close("clip", jnp.clip(jnp.array([-2.0, 0.5, 3.0]), -1.0, 1.0))
    gx, gv = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, v)
    t.close("gx", gx)
    t.close("gv", gv)
    table = iota(15).reshape(5, 3) / 15.0
    t.close("embed", embed(table, jnp.array([4, 0, 4, 2], jnp.int32)))
    t.close("g table", jax.jit(jax.grad(embed_loss))(table))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
