"""samples/pipeline_transformer.smp: a Transformer block cut into two pipeline stages (stage 0
embeds the tokens and runs attention, stage 1 the MLP and the logits through the tied
embedding), each stage Megatron over "model" and data parallel over "data", trained with
AdamW over 4 micro-batches. Against JAX: the same two stages as shard_maps over a data x model
mesh, composed, differentiated by jax.value_and_grad on the whole batch (the pipeline's
micro-batches and the stage axis change how sums round, not what they are); the loss at each
of the 6 steps and the final loss with rtol 1e-4, and the step counter exactly."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transformer import layer_norm, gelu  # noqa: E402  (the unpipelined sample's twin: the same block)

PROGRAM = "samples/pipeline_transformer.smp"
m = twin.mesh(("data", 2), ("model", 2))
COL, ROW = P(None, "model"), P("model", None)


@smap(m, (P("data", None), P(), P(), P(), P(), COL, COL, COL, ROW), P("data", None, None))
def attention_block(tokens, emb, pos, ln1_g, ln1_b, wq, wk, wv, wo):
    b = tokens.shape[0]
    x = emb[tokens[:, :8]] + pos
    h = layer_norm(x, ln1_g, ln1_b).reshape(b * 8, 16)
    q, k, v = [(h @ w).reshape(b, 8, 8) for w in (wq, wk, wv)]
    scores = q @ jnp.transpose(k, (0, 2, 1)) / jnp.sqrt(jnp.float32(8.0))
    causal = jnp.tril(jnp.ones((8, 8), bool))
    a = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1) @ v
    return x + jax.lax.psum(a.reshape(b * 8, 8) @ wo, "model").reshape(b, 8, 16)


@smap(m, (P("data", None, None), P("data", None), P(), P(), P(), COL, P("model"), ROW, P()), P())
def mlp_and_loss(x, tokens, emb, ln2_g, ln2_b, w1, b1, w2, b2):
    b = tokens.shape[0]
    u = gelu(layer_norm(x, ln2_g, ln2_b).reshape(b * 8, 16) @ w1 + b1)
    y = x.reshape(b * 8, 16) + jax.lax.psum(u @ w2, "model") + b2
    logits = y @ emb.T
    targets = tokens[:, 1:].reshape(b * 8)
    ce = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), targets[:, None], axis=1))
    return jax.lax.pmean(ce, "data")


def loss(p, tokens):
    x = attention_block(tokens, p["emb"], p["pos"], p["ln1_g"], p["ln1_b"], p["wq"], p["wk"], p["wv"], p["wo"])
    return mlp_and_loss(x, tokens, p["emb"], p["ln2_g"], p["ln2_b"], p["w1"], p["b1"], p["w2"], p["b2"])


def check(t):
    tokens = jnp.asarray(np.load(os.path.join(twin.ROOT, "samples", "data", "tokens.npy")))
    p = {"emb": twin.normal((16, 16), 1) * 0.5, "pos": twin.normal((8, 16), 2) * 0.1,
         "ln1_g": jnp.ones(16), "ln1_b": jnp.zeros(16),
         "wq": twin.normal((16, 16), 3) * 0.25, "wk": twin.normal((16, 16), 4) * 0.25,
         "wv": twin.normal((16, 16), 5) * 0.25, "wo": twin.normal((16, 16), 6) * 0.25,
         "ln2_g": jnp.ones(16), "ln2_b": jnp.zeros(16),
         "w1": twin.normal((16, 32), 7) * 0.25, "b1": jnp.zeros(32),
         "w2": twin.normal((32, 16), 8) * 0.18, "b2": jnp.zeros(16)}
    p = {k: jnp.asarray(v, jnp.float32) for k, v in p.items()}
    ms = {k: jnp.zeros_like(v) for k, v in p.items()}
    vs = {k: jnp.zeros_like(v) for k, v in p.items()}
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    for step in range(1, 7):
        l, g = value_and_grad(p, tokens)
        for k in p:  # stdlib/optim.smp's adamw
            ms[k] = 0.9 * ms[k] + 0.1 * g[k]
            vs[k] = 0.999 * vs[k] + 0.001 * (g[k] * g[k])
            mhat, vhat = ms[k] / (1 - 0.9 ** step), vs[k] / (1 - 0.999 ** step)
            p[k] = p[k] - 0.01 * (mhat / (jnp.sqrt(vhat) + 1e-8) + 0.01 * p[k])
        t.equal("step", step, index=step - 1)
        t.close("loss", l, rtol=1e-4, index=step - 1)
    t.close("final loss", loss(p, tokens), rtol=1e-4)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
