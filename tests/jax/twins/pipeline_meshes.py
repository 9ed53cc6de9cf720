"""tests/run/pipeline_meshes.smp: stages on meshes of different sizes (a data-parallel stage on 4
devices, two tensor-parallel stages on 2, a skip connection) under 1f1b and gpipe: the value and
gradients equal jax.value_and_grad of the same loss on the whole batch (f32; rtol 1e-4, atol
1e-5: the micro-batches' sums round differently). The shmaps' bodies are computed unsplit: a
data-parallel tanh(x @ w) and Megatron's column/row-split MLP summed over "model" are the
plain functions."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "tests/run/pipeline_meshes.smp"


def model(p, x):
    h = jnp.tanh(x @ p["w0"])
    a = jnp.tanh(h @ p["wa"]) @ p["wb"]
    return jnp.tanh(a @ p["wc"]) @ p["wd"] + h


def loss(p, x, y):
    d = model(p, x) - y
    return jnp.mean(d * d)


def check(t):
    p = {"w0": twin.normal((4, 6), 1) * 0.5, "wa": twin.normal((6, 8), 2) * 0.5,
         "wb": twin.normal((8, 6), 3) * 0.5, "wc": twin.normal((6, 8), 4) * 0.5,
         "wd": twin.normal((8, 6), 5) * 0.5}
    x, y = twin.normal((16, 4), 6), twin.normal((16, 6), 7)
    close = dict(rtol=1e-4, atol=1e-5)
    l, g = jax.value_and_grad(loss)(p, x, y)
    for name in ("1f1b", "back"):
        t.close(name + " loss", l, **close)
        t.close(name + " grad w0", g["w0"][1], **close)
    t.close("1f1b grad wa", g["wa"][2], **close)
    t.close("1f1b grad wd", g["wd"][3], **close)
    t.close("back grad wb", g["wb"][4], **close)
    t.close("back grad wc", g["wc"][0], **close)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
