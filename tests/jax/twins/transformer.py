"""samples/transformer.smp: a Transformer block with Megatron tensor parallelism over "model"
and data parallelism over "data", trained with AdamW. Against JAX: the same block written
with shard_map over the same 2 x 2 mesh and specs (each "model" device one head and half the
MLP, a psum over "model" after wo and after w2, pmean over "data"), differentiated by
jax.value_and_grad; the loss at each of the 6 steps and the final loss with rtol 1e-4, and
the step counter exactly. (tests/numpy/check_samples.py checks the same sample against an
unsharded float64 model with the backward pass written by hand.)"""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap

PROGRAM = "samples/transformer.smp"
m = twin.mesh(("data", 2), ("model", 2))
COL, ROW = P(None, "model"), P("model", None)


def layer_norm(x, g, b, eps=1e-5):  # stdlib/nn.smp
    d = x - jnp.mean(x, axis=-1, keepdims=True)
    return d / jnp.sqrt(jnp.mean(d * d, axis=-1, keepdims=True) + eps) * g + b


def gelu(x):  # the tanh approximation, as stdlib/nn.smp
    return 0.5 * x * (1.0 + jnp.tanh(np.sqrt(2.0 / np.pi).astype(np.float32) * (x + 0.044715 * x ** 3)))


@smap(m, (P("data", None), P(), P(), P(), P(), COL, COL, COL, ROW, P(), P(), COL, P("model"), ROW, P()), P())
def loss(tokens, emb, pos, ln1_g, ln1_b, wq, wk, wv, wo, ln2_g, ln2_b, w1, b1, w2, b2):
    ids, targets = tokens[:, :8], tokens[:, 1:].reshape(32)
    x = emb[ids] + pos
    h = layer_norm(x, ln1_g, ln1_b).reshape(32, 16)
    q, k, v = [(h @ w).reshape(4, 8, 8) for w in (wq, wk, wv)]
    scores = q @ jnp.transpose(k, (0, 2, 1)) / jnp.sqrt(jnp.float32(8.0))
    causal = jnp.tril(jnp.ones((8, 8), bool))
    attn = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1) @ v
    x = x + jax.lax.psum(attn.reshape(32, 8) @ wo, "model").reshape(4, 8, 16)
    h2 = layer_norm(x, ln2_g, ln2_b).reshape(32, 16)
    u = gelu(h2 @ w1 + b1)
    x = x + (jax.lax.psum(u @ w2, "model") + b2).reshape(4, 8, 16)
    logits = x.reshape(32, 16) @ emb.T
    ce = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), targets[:, None], axis=1))
    return jax.lax.pmean(ce, "data")


def check(t):
    tokens = jnp.asarray(np.load(os.path.join(twin.ROOT, "samples", "data", "tokens.npy")))
    params = [twin.normal((16, 16), 1) * 0.5, twin.normal((8, 16), 2) * 0.1,
              jnp.ones(16), jnp.zeros(16),
              twin.normal((16, 16), 3) * 0.25, twin.normal((16, 16), 4) * 0.25,
              twin.normal((16, 16), 5) * 0.25, twin.normal((16, 16), 6) * 0.25,
              jnp.ones(16), jnp.zeros(16),
              twin.normal((16, 32), 7) * 0.25, jnp.zeros(32),
              twin.normal((32, 16), 8) * 0.18, jnp.zeros(16)]
    params = [jnp.asarray(p, jnp.float32) for p in params]
    ms = [jnp.zeros_like(p) for p in params]
    vs = [jnp.zeros_like(p) for p in params]
    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=tuple(range(1, 15))))
    for step in range(1, 7):
        l, grads = value_and_grad(tokens, *params)
        t.equal("step", step, index=step - 1)
        t.close("loss", l, rtol=1e-4, index=step - 1)
        for i, g in enumerate(grads):  # stdlib/nn.smp's adamw_step
            ms[i] = 0.9 * ms[i] + 0.1 * g
            vs[i] = 0.999 * vs[i] + 0.001 * (g * g)
            mhat, vhat = ms[i] / (1 - 0.9 ** step), vs[i] / (1 - 0.999 ** step)
            params[i] = params[i] - 0.01 * (mhat / (jnp.sqrt(vhat) + 1e-8) + 0.01 * params[i])
    t.close("final loss", loss(tokens, *params), rtol=1e-4)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
