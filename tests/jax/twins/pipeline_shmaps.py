"""tests/run/pipeline_shmaps.smp: a two-stage pipeline whose stages are shmaps on a stage x data x
model mesh reading per-example values (a Megatron MLP with a psum over "model"; a row-parallel
matmul whose psum_scatter splits each device's examples over "model", gathered back) and a
masked mean over 2 micro-batches equals jax.value_and_grad of the same shard_maps on the whole
batch, SGD step by step (f32; rtol 1e-4, atol 1e-5)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/pipeline_shmaps.smp"
m = twin.mesh(("data", 2), ("model", 2))


@smap(m, (P("data", None), P(None, "model"), P("model", None)), P("data", None))
def megatron(x, w1, w2):
    return x + jax.lax.psum(jnp.tanh(x @ w1) @ w2, "model")


@smap(m, (P("data", "model"), P("model", None), P()), P("data", None), check_vma=False)
def rescatter(h, w, s):
    part = jax.lax.psum_scatter(h @ w, "model", scatter_dimension=0, tiled=True)
    return jax.lax.all_gather(jnp.tanh(part) * s, "model", axis=0, tiled=True)


@smap(m, (P("data", None), P("data", None), P("data")), P())
def masked_sq(y, t, mask):
    return jax.lax.psum(jnp.sum(jnp.sum((y - t) * (y - t), axis=1) * mask), "data")


def loss(p, x, t, mask):
    y = rescatter(megatron(x, p["w1"], p["w2"]), p["w3"], p["s"])
    return masked_sq(y, t, mask) / jnp.sum(mask)


def check(t):
    p = {"w1": twin.normal((4, 8), 1) * 0.5, "w2": twin.normal((8, 4), 2) * 0.5,
         "w3": twin.normal((4, 4), 3) * 0.5, "s": jnp.float32(1.5)}
    x = twin.normal((16, 4), 4)
    y = twin.normal((16, 4), 5) * 0.5
    mask = (twin.uniform((16,), 6) > 0.3).astype(jnp.float32)
    step = jax.jit(jax.value_and_grad(loss))
    for k in range(3):
        l, g = step(p, x, y, mask)
        t.close("loss", l, rtol=1e-4, atol=1e-5, index=k)
        p = jax.tree_util.tree_map(lambda w, d: w - 0.3 * d, p, g)
    t.close("w3[0]", p["w3"][0], rtol=1e-4, atol=1e-5)
    t.close("s", p["s"], rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
