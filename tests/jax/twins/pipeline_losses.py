"""tests/run/pipeline_losses.smp: a three-stage pipeline's value and gradients for sum, mean and
masked-mean losses (with a skip connection from stage 0 to stage 2) over 4, 1 and 2
micro-batches equal jax.value_and_grad of the same loss on the whole batch (f32; rtol 1e-4,
atol 1e-5: the micro-batches' sums round differently), and the model run outside a pipeline."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "tests/run/pipeline_losses.smp"


def model(p, x):
    h = jnp.tanh(x @ p["w1"])
    g = jnp.tanh(h @ p["w2"]) * p["s"]
    return (g + h) @ p["w3"]


def sum_loss(p, x, y, mask):
    d = model(p, x) - y
    return jnp.sum(d * d) + 0.01 * jnp.sum(p["w2"] * p["w2"])


def mean_loss(p, x, y, mask):
    d = model(p, x) - y
    return jnp.mean(d * d)


def masked_loss(p, x, y, mask):
    d = model(p, x) - y
    return jnp.sum(jnp.sum(d * d, axis=1) * mask) / jnp.sum(mask)


def check(t):
    p = {"w1": twin.normal((4, 6), 1) * 0.5, "w2": twin.normal((6, 6), 2) * 0.5,
         "w3": twin.normal((6, 3), 3) * 0.5, "s": twin.normal((6,), 4)}
    x, y = twin.normal((8, 4), 5), twin.normal((8, 3), 6)
    mask = jnp.where(twin.uniform((8,), 7) < 0.6, 1.0, 0.0).astype(jnp.float32)
    close = dict(rtol=1e-4, atol=1e-5)
    l, g = jax.value_and_grad(sum_loss)(p, x, y, mask)
    t.close("sum loss", l, **close)
    t.close("sum grad w1", g["w1"][0], **close)
    t.close("sum grad w2", g["w2"][1], **close)
    t.close("sum grad s", g["s"], **close)
    l, g = jax.value_and_grad(mean_loss)(p, x, y, mask)
    t.close("mean loss", l, **close)
    t.close("mean grad w1", g["w1"][0], **close)
    t.close("mean grad w3", g["w3"][2], **close)
    t.close("one loss", l, **close)
    t.close("one grad w2", g["w2"][1], **close)
    l, g = jax.value_and_grad(masked_loss)(p, x, y, mask)
    t.close("masked loss", l, **close)
    t.close("masked grad w1", g["w1"][0], **close)
    t.close("masked grad w3", g["w3"][2], **close)
    t.close("two loss", l, **close)
    t.close("two grad s", g["s"], **close)
    t.close("model outside", model(p, x)[0])


if __name__ == "__main__":
    twin.main(PROGRAM, check)
