"""tests/run/shmap_trees.smp: shmap functions taking and returning dicts, with dict in_specs /
out_specs and a single P() for a whole dict (JAX's prefix rule), against jax.shard_map with the
same pytree specs; value_and_grad through the shmap with respect to the dict, and three
optax.sgd(0.1, momentum=0.9) steps (f32; rtol 1e-4, atol 1e-5)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import optax
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/shmap_trees.smp"
m = twin.mesh(("data", 2), ("model", 2))


@smap(m, ({"w1": P(None, "model"), "w2": P("model", None), "b": P()}, P("data")), P("data"))
def mlp(p, x):
    h = jnp.tanh(x @ p["w1"])
    return jax.lax.psum(h @ p["w2"], "model") + p["b"]


@smap(m, (P(), P("data")), ({"mean": P(), "rows": P("data")}, P()))
def stats(p, x):
    y = x @ p["w1"]
    return {"mean": jax.lax.pmean(jnp.mean(y), "data"), "rows": jnp.sum(y, axis=1)}, \
        jax.lax.psum(jnp.sum(p["b"]), "data") / 2.0


def loss(p, x, y):
    out = mlp(p, x)
    return jnp.mean((out - y) * (out - y))


def check(t):
    p = {"w1": twin.normal((3, 4), 1) * 0.5, "w2": twin.normal((4, 2), 2) * 0.5,
         "b": jnp.array([0.1, -0.2], jnp.float32)}
    x, y = twin.normal((8, 3), 3), twin.normal((8, 2), 4)
    t.close("out", jax.jit(mlp)(p, x))
    s, bsum = jax.jit(stats)(p, x)
    t.close_tree("stats", s)
    t.close("bsum", bsum)
    v, g = jax.jit(jax.value_and_grad(loss))(p, x, y)
    t.close("loss", v)
    t.close_tree("grad", g)
    opt = optax.sgd(0.1, momentum=0.9)
    st = opt.init(p)
    for _ in range(3):
        u, st = opt.update(jax.grad(loss)(p, x, y), st, p)
        p = optax.apply_updates(p, u)
    t.close_tree("trained", p)
    t.close("loss after", loss(p, x, y))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
