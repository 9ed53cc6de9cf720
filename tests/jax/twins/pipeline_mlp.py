"""samples/pipeline_mlp.smp: Alpa's ManualPipelineMLPModel trained by a two-stage pipeline over
16 micro-batches equals jax.value_and_grad on the whole batch with SGD, step by step (f32; rtol
1e-4, atol 1e-6)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "samples/pipeline_mlp.smp"


def dense(x, w, b):
    return jnp.maximum(x @ w + b, 0.0)


def loss(p, x, y):
    h = dense(dense(x, p["w1"], p["b1"]), p["w2"], p["b2"])
    out = dense(dense(h, p["w3"], p["b3"]), p["w4"], p["b4"])
    return jnp.mean((out - y) * (out - y))


def check(t):
    z = lambda n: jnp.zeros(n, jnp.float32)
    p = {"w1": twin.normal((16, 64), 1) * 0.25, "b1": z(64), "w2": twin.normal((64, 16), 2) * 0.125, "b2": z(16),
         "w3": twin.normal((16, 64), 3) * 0.25, "b3": z(64), "w4": twin.normal((64, 16), 4) * 0.125, "b4": z(16)}
    x = twin.normal((64, 16), 5)
    y = jnp.maximum(twin.normal((64, 16), 6), 0.0)
    step = jax.jit(jax.value_and_grad(loss))
    for k in range(5):
        l, g = step(p, x, y)
        t.close("loss", l, rtol=1e-4, atol=1e-6, index=k)
        p = jax.tree_util.tree_map(lambda w, d: w - 0.2 * d, p, g)
    t.close("w4[0, 0:4]", p["w4"][0, 0:4], rtol=1e-4, atol=1e-6)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
