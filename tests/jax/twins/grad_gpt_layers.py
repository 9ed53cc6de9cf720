"""tests/run/grad_gpt_layers.smp: two transformer layers with stacked [L, ...] weights, a loop
over the layers reading each one's slices, Megatron over "model" and data parallelism over
"data" on a 2 x 2 mesh, three SGD steps. Against JAX: the same model written with shard_map
over the same mesh and specs (lax.fori_loop with dynamic_slice over the layers, a psum over
"model" after wo and after w2, pmean over "data"), differentiated by jax.value_and_grad; the
loss and each gradient's squared norm at every step, and the final loss, with rtol 1e-4."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/grad_gpt_layers.smp"
m = twin.mesh(("data", 2), ("model", 2))
COL, ROW, VEC = P(None, None, "model"), P(None, "model", None), P(None, "model")
NAMES = ["emb", "pos", "ln1_g", "ln1_b", "wq", "wk", "wv", "wo", "ln2_g", "ln2_b", "w1", "b1", "w2", "b2"]


def layer_norm(x, g, b, eps=1e-5):  # stdlib/nn.smp
    d = x - jnp.mean(x, axis=-1, keepdims=True)
    return d / jnp.sqrt(jnp.mean(d * d, axis=-1, keepdims=True) + eps) * g + b


def gelu(x):  # the tanh approximation, as stdlib/nn.smp
    return 0.5 * x * (1.0 + jnp.tanh(np.sqrt(2.0 / np.pi).astype(np.float32) * (x + 0.044715 * x ** 3)))


@smap(m, (P("data", None), P(), P(), P(), P(), COL, COL, COL, ROW, P(), P(), COL, VEC, ROW, P()), P())
def loss(tokens, emb, pos, ln1_g, ln1_b, wq, wk, wv, wo, ln2_g, ln2_b, w1, b1, w2, b2):
    ids, targets = tokens[:, :8], tokens[:, 1:].reshape(32)
    causal = jnp.tril(jnp.ones((8, 8), bool))

    def layer(l, x):
        at = lambda w: jax.lax.dynamic_index_in_dim(w, l, 0, keepdims=False)
        h = layer_norm(x, at(ln1_g), at(ln1_b)).reshape(32, 16)
        q, k, v = [(h @ at(w)).reshape(4, 8, 8) for w in (wq, wk, wv)]
        scores = q @ jnp.transpose(k, (0, 2, 1)) / jnp.sqrt(jnp.float32(8.0))
        attn = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1) @ v
        x = x + jax.lax.psum(attn.reshape(32, 8) @ at(wo), "model").reshape(4, 8, 16)
        h2 = layer_norm(x, at(ln2_g), at(ln2_b)).reshape(32, 16)
        u = gelu(h2 @ at(w1) + at(b1))
        return x + (jax.lax.psum(u @ at(w2), "model") + at(b2)).reshape(4, 8, 16)

    x = jax.lax.fori_loop(0, 2, layer, emb[ids] + pos)
    logits = x.reshape(32, 16) @ emb.T
    ce = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), targets[:, None], axis=1))
    return jax.lax.pmean(ce, "data")


def check(t):
    i, j = np.indices((8, 9))
    tokens = jnp.asarray((i * 5 + j * 3 + i * j) % 16, jnp.int32)
    params = [twin.normal((16, 16), 1) * 0.5, twin.normal((8, 16), 2) * 0.1,
              np.ones((2, 16)), np.zeros((2, 16)),
              twin.normal((2, 16, 16), 3) * 0.25, twin.normal((2, 16, 16), 4) * 0.25,
              twin.normal((2, 16, 16), 5) * 0.25, twin.normal((2, 16, 16), 6) * 0.25,
              np.ones((2, 16)), np.zeros((2, 16)),
              twin.normal((2, 16, 32), 7) * 0.25, np.zeros((2, 32)),
              twin.normal((2, 32, 16), 8) * 0.18, np.zeros((2, 16))]
    params = [jnp.asarray(p, jnp.float32) for p in params]
    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=tuple(range(1, 15))))
    for step in range(3):
        l, grads = value_and_grad(tokens, *params)
        t.close("loss", l, rtol=1e-4, index=step)
        for name, g in zip(NAMES, grads):
            t.close("d %s squared" % name, jnp.sum(g * g), rtol=1e-4, index=step)
        params = [p - 0.05 * g for p, g in zip(params, grads)]
    t.close("final loss", loss(tokens, *params), rtol=1e-4)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
