"""samples/fsdp.smp: fully sharded data parallelism (each weight split over "data" and "model",
all_gather'd over "data" before use) trained with AdamW, against jax.shard_map with the same
dict in_specs and optax.adamw (f32; rtol 1e-4, atol 1e-5), four steps."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import optax
import twin
from twin import jax, jnp, P, smap

PROGRAM = "samples/fsdp.smp"
m = twin.mesh(("data", 2), ("model", 2))


@smap(m, ({"w1": P("data", "model"), "w2": P("model", "data")}, P("data"), P("data")), P())
def loss(p, x, y):
    w1 = jax.lax.all_gather(p["w1"], "data", axis=0, tiled=True)
    w2 = jax.lax.all_gather(p["w2"], "data", axis=1, tiled=True)
    out = jax.lax.psum(jnp.tanh(x @ w1) @ w2, "model")
    return jax.lax.pmean(jnp.mean((out - y) * (out - y)), "data")


def check(t):
    p = {"w1": twin.normal((8, 16), 1) * 0.35, "w2": twin.normal((16, 4), 2) * 0.25}
    x, y = twin.normal((8, 8), 3), twin.normal((8, 4), 4)
    opt = optax.adamw(0.05, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01)
    s = opt.init(p)
    step = jax.jit(jax.value_and_grad(loss))
    for k in range(4):
        l, g = step(p, x, y)
        t.close("loss", l, index=k)
        u, s = opt.update(g, s, p)
        p = optax.apply_updates(p, u)
    t.close_tree("p", p)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
