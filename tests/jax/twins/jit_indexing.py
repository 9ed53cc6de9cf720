"""tests/run/jit_indexing.smp: indexing, slicing and joining in jit functions under jax.jit with
the same shardings, values and gradients (argsort stable, as numpy's and shmapc's)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, iota
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_indexing.smp"
m = twin.mesh(("X", 2), ("Y", 2))


def S(*spec):
    return NamedSharding(m, P(*spec))


embed = jax.jit(lambda table, tokens: table[tokens], in_shardings=(S("X", "Y"), S("X")))


def along_rows_fn(a):
    return (a[:, 1:4], jnp.argmax(a, axis=1).astype(jnp.int32), jnp.cumsum(a, axis=1),
            jnp.argsort(a, axis=1, stable=True).astype(jnp.int32), jnp.concatenate([a, a * 2.0], axis=1),
            jax.lax.dynamic_slice(a, (1, 0), (7, 6)))


along_rows = jax.jit(along_rows_fn, in_shardings=S("X", "Y"))
# (v's 5 columns over Y are uneven, which jax.jit refuses for a parameter: the sharding goes on
# by with_sharding_constraint)
scattered = jax.jit(lambda x, idx, v: x.at[:, idx].add(jax.lax.with_sharding_constraint(v, S("X", "Y"))),
                    in_shardings=(S("X", "Y"), S(), S("X")))
counted = jax.jit(lambda a: a + jax.lax.broadcasted_iota(jnp.int32, (8, 6), 1).astype(jnp.float32)
                  + jax.lax.dynamic_update_slice(a, jnp.ones((8, 2), jnp.float32), (0, 2)), in_shardings=S("X"))


def loss(table, a, v):
    tokens = (jnp.arange(12, dtype=jnp.int32) % 6).reshape(4, 3)
    e = embed(table, tokens)
    s, am, c, o, cat, ds = along_rows(a)
    return (jnp.sum(e * e) + jnp.sum(jnp.sin(s)) + jnp.sum(c * c) * 0.01 + jnp.sum(jnp.cos(cat)) + jnp.sum(ds)
            + jnp.sum(scattered(a, jnp.arange(5, dtype=jnp.int32) % 3, v) * a))


def check(t):
    table = jnp.sin(iota(48).reshape(6, 8))
    tokens = (jnp.arange(12, dtype=jnp.int32) % 6).reshape(4, 3)
    t.close("embed row 2", embed(table, tokens)[2])
    a = jnp.cos(iota(48).reshape(8, 6))
    s, am, c, o, cat, ds = along_rows(a)
    t.close("slice", s)
    t.equal("argmax", am)
    t.close("cumsum", c)
    t.equal("argsort", o)
    t.close("concatenate row 5", cat[5])
    t.close("dynamic_slice", ds)
    v = iota(40).reshape(8, 5) * 0.1
    t.close("scatter_add", scattered(a, jnp.arange(5, dtype=jnp.int32) % 3, v))
    t.close("counted", counted(a))
    gt, ga, gv = jax.grad(loss, argnums=(0, 1, 2))(table, a, v)
    t.close("grad table", gt)
    t.close("grad a", ga)
    t.close("grad v", gv)
    metric, _, _, _ = twin.check_grads_metric(loss, [table, a, v])
    t.equal("check_grads", metric < 0.01, how="JAX jvp/vjp vs float64 fd: %.2g" % metric)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
