"""tests/run/pipeline_placement.smp: stages placed on device groups by placement= (a V of four
stages on two groups under gpipe, 1f1b and zb-h1; three stages on two groups) and by a
hand-written order=, with a skip connection and a weight read by two stages on one group: the
value and gradients equal jax.value_and_grad of the same loss on the whole batch (f32; rtol
1e-4, atol 1e-5: the micro-batches' sums round differently)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "tests/run/pipeline_placement.smp"


def model(p, x):
    h = jnp.tanh(x @ p["w1"])
    a = jnp.tanh(h @ p["w2"])
    b = jnp.tanh(a @ p["w3"]) * p["s"]
    return (b + h) @ p["w4"] + h @ p["w1"].T @ p["w5"]


def three(p, x):
    h = jnp.tanh(x @ p["w1"])
    a = jnp.tanh(h @ p["w2"])
    return a @ p["w4"]


def mean_loss(p, x, y):
    d = model(p, x) - y
    return jnp.mean(d * d)


def sum_loss3(p, x, y):
    d = three(p, x) - y
    return jnp.sum(d * d)


def check(t):
    p = {"w1": twin.normal((4, 6), 1) * 0.5, "w2": twin.normal((6, 6), 2) * 0.5,
         "w3": twin.normal((6, 6), 3) * 0.5, "w4": twin.normal((6, 3), 4) * 0.5,
         "w5": twin.normal((4, 3), 5) * 0.5, "s": twin.normal((6,), 6)}
    x, y = twin.normal((8, 4), 7), twin.normal((8, 3), 8)
    close = dict(rtol=1e-4, atol=1e-5)
    l, g = jax.value_and_grad(mean_loss)(p, x, y)
    t.close("gpipe loss", l, **close)
    t.close("gpipe grad w1", g["w1"][0], **close)
    t.close("gpipe grad w5", g["w5"][1], **close)
    t.close("1f1b loss", l, **close)
    t.close("1f1b grad w1", g["w1"][0], **close)
    t.close("1f1b grad s", g["s"], **close)
    t.close("zb loss", l, **close)
    t.close("zb grad w2", g["w2"][1], **close)
    t.close("zb grad w4", g["w4"][2], **close)
    t.close("order loss", l, **close)
    t.close("order grad w1", g["w1"][0], **close)
    t.close("order grad w3", g["w3"][2], **close)
    l, g = jax.value_and_grad(sum_loss3)(p, x, y)
    t.close("three loss", l, **close)
    t.close("three grad w1", g["w1"][0], **close)
    t.close("three grad w4", g["w4"][2], **close)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
