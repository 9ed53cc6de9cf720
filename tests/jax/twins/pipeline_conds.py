"""tests/run/pipeline_conds.smp: ifs (on an argument that is not the batch, and on the
parameters) and a while loop over per-example values inside pipeline stages: the value and
gradients of the 1f1b step equal jax.value_and_grad on the whole batch for both branches (f32;
rtol 1e-4, atol 1e-5: the micro-batches' sums round differently), and the inference pipeline's
result the model's on the whole batch."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp


PROGRAM = "tests/run/pipeline_conds.smp"


def model(p, x, mode):
    h = jnp.tanh(x @ p["w1"])
    h = jax.lax.cond(mode > 0, lambda h: h * p["s"], lambda h: h + p["s"], h)
    a = h @ p["w2"]
    return jax.lax.cond(jnp.sum(p["w2"]) > 0, jnp.tanh, lambda a: a * a, a)


def loss(p, x, y, mode):
    d = model(p, x, mode) - y
    return jnp.mean(d * d)


def iterate(p, x):
    h = jnp.tanh(x @ p["w1"])
    for _ in range(3):
        h = jnp.tanh(h @ p["w3"]) + h * 0.5
    return h @ p["w2"]


def check(t):
    p = {"w1": twin.normal((4, 6), 1) * 0.5, "w2": twin.normal((6, 3), 2) * 0.5,
         "w3": twin.normal((6, 6), 3) * 0.5, "s": twin.normal((6,), 4)}
    x, y = twin.normal((8, 4), 5), twin.normal((8, 3), 6)
    close = dict(rtol=1e-4, atol=1e-5)
    l, g = jax.value_and_grad(loss)(p, x, y, 1.0)
    t.close("times loss", l, **close)
    t.close("times grad s", g["s"], **close)
    t.close("times grad w2", g["w2"][1], **close)
    l, g = jax.value_and_grad(loss)(p, x, y, -1.0)
    t.close("plus loss", l, **close)
    t.close("plus grad s", g["s"], **close)
    t.close("plus grad w1", g["w1"][2], **close)
    t.close("while", iterate(p, x), **close)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
