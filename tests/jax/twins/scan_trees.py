"""tests/run/scan_trees.smp: scan with a tuple carry, a dict of stacked layers as xs, a dict of
consts (closed over in JAX) and dict outputs, forward, reversed and its gradient with respect
to the stacked dict, against jax.lax.scan (f32; rtol 1e-4, atol 1e-5)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "tests/run/scan_trees.smp"


def block(carry, layer, cfg):
    h, acc = carry
    out = jnp.tanh(h @ layer["w"] + layer["b"]) * cfg["scale"]
    return (out, acc + jnp.sum(out)), {"mean": jnp.mean(out), "first": out[0]}


def run(layers, x, reverse=False):
    cfg = {"scale": jnp.float32(0.5)}
    return jax.lax.scan(lambda c, l: block(c, l, cfg), (x, jnp.float32(0.0)), layers, reverse=reverse)


def loss(layers, x):
    carry, stats = run(layers, x)
    return jnp.sum(carry[0] * carry[0]) + carry[1] + jnp.sum(stats["mean"])


def check(t):
    layers = {"w": twin.normal((3, 4, 4), 1) * 0.5, "b": twin.normal((3, 4), 2) * 0.1}
    x = twin.normal((2, 4), 3)
    carry, stats = run(layers, x)
    t.close_tree("carry", carry)
    t.close_tree("stats", stats)
    t.close_tree("reversed", run(layers, x, reverse=True)[0])
    t.close_tree("grad", jax.grad(loss)(layers, x))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
