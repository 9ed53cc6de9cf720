"""samples/sharded_layers.smp: stacked residual tanh layers scanned inside shard_map, tensor-
parallel over "model" (dict in_specs of [L, ...] weights), data-parallel over "data", trained
with optax.adamw for four steps (f32; rtol 1e-4, atol 1e-5)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import optax
import twin
from twin import jax, jnp, P, smap

PROGRAM = "samples/sharded_layers.smp"
m = twin.mesh(("data", 2), ("model", 2))


def layer(x, w):
    return x + jax.lax.psum(jnp.tanh(x @ w["w1"]) @ w["w2"], "model"), jnp.float32(0.0)


@smap(m, ({"w1": P(None, None, "model"), "w2": P(None, "model", None)}, P("data"), P("data")), P())
def loss(layers, x, y):
    out, _ = jax.lax.scan(layer, x, layers)
    return jax.lax.pmean(jnp.mean((out - y) * (out - y)), "data")


def check(t):
    p = {"w1": twin.normal((3, 8, 16), 1) * 0.3, "w2": twin.normal((3, 16, 8), 2) * 0.2}
    x, y = twin.normal((8, 8), 3), twin.normal((8, 8), 4)
    opt = optax.adamw(0.02, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01)
    s = opt.init(p)
    step = jax.jit(jax.value_and_grad(loss))
    for k in range(4):
        l, g = step(p, x, y)
        t.equal("step", k + 1, index=k)
        t.close("loss", l, index=k)
        u, s = opt.update(g, s, p)
        p = optax.apply_updates(p, u)
    t.close("w1[2, 0]", p["w1"][2, 0])
    t.close("w2[0, 0]", p["w2"][0, 0])


if __name__ == "__main__":
    twin.main(PROGRAM, check)
