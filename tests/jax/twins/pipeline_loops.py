"""tests/run/pipeline_loops.smp: a two-stage pipeline whose stages loop over per-example values
(stage 0 a loop over a [3, 4, 4] stack of layers carrying the examples; stage 1, inside a
data-parallel shard_map, a scan over 2 layers stacking each layer's activations and carrying a
sum over the examples) over 4 micro-batches equals jax.value_and_grad of the same model on the
whole batch, SGD step by step (f32; rtol 1e-4, atol 1e-5)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/pipeline_loops.smp"
m = twin.mesh(("data", 2))


def layer(h, w):
    n = jnp.tanh(h @ w)
    return n, (n, jnp.sum(n * n))


@smap(m, (P("data", None), P()), (P("data", None), P(None, "data", None), P()))
def tower(h, ws):
    y, (hs, squares) = jax.lax.scan(layer, h, ws)
    return y, hs, jax.lax.psum(jnp.sum(squares), "data")


def loss(p, x, t):
    h = x
    for i in range(3):
        h = jnp.tanh(h @ p["stack"][i]) + h
    y, hs, squares = tower(h, p["tower"])
    return jnp.mean((y - t) * (y - t)) + 0.1 * jnp.mean(hs) + 0.01 * squares / 16.0


def check(t):
    p = {"stack": twin.normal((3, 4, 4), 1) * 0.4, "tower": twin.normal((2, 4, 4), 2) * 0.4}
    x = twin.normal((16, 4), 3)
    y = twin.normal((16, 4), 4) * 0.5
    step = jax.jit(jax.value_and_grad(loss))
    for k in range(3):
        l, g = step(p, x, y)
        t.close("loss", l, rtol=1e-4, atol=1e-5, index=k)
        p = jax.tree_util.tree_map(lambda w, d: w - 0.2 * d, p, g)
    t.close("stack[2, 0]", p["stack"][2, 0], rtol=1e-4, atol=1e-5)
    t.close("tower[1, 3]", p["tower"][1, 3], rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
