"""tests/run/jit_trees.smp: @jit functions taking and returning dicts with dict shardings and a
single P() for a whole dict, against jax.jit with the same pytree shardings (NamedSharding),
the gradient through them with respect to the dict, and one optax.adam step (f32; rtol 1e-4,
atol 1e-5)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import optax
import twin
from twin import jax, jnp, P
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_trees.smp"
m = twin.mesh(("data", 2), ("model", 2))


def S(*spec):
    return NamedSharding(m, P(*spec))


def mlp_body(p, x):
    out = jnp.tanh(x @ p["w1"]) @ p["w2"] + p["b"]
    return {"out": out, "total": jnp.sum(out)}


mlp = jax.jit(mlp_body, in_shardings=({"w1": S(None, "model"), "w2": S("model", None), "b": S()}, S("data")),
              out_shardings={"out": S("data"), "total": S()})
replicated_params = jax.jit(lambda p, x: x @ p["w1"], in_shardings=(S(), S("data")))


def loss(p, x, y):
    r = mlp(p, x)
    return jnp.mean((r["out"] - y) * (r["out"] - y)) + 0.01 * r["total"]


def check(t):
    p = {"w1": twin.normal((3, 4), 1) * 0.5, "w2": twin.normal((4, 2), 2) * 0.5,
         "b": jnp.array([0.1, -0.2], jnp.float32)}
    x, y = twin.normal((8, 3), 3), twin.normal((8, 2), 4)
    t.close_tree("mlp", mlp(p, x))
    t.close("replicated", replicated_params(p, x))
    g = jax.grad(loss)(p, x, y)
    t.close_tree("grad", g)
    opt = optax.adam(0.01, b1=0.9, b2=0.999, eps=1e-8)
    u, _ = opt.update(g, opt.init(p), p)
    t.close_tree("adam", optax.apply_updates(p, u))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
