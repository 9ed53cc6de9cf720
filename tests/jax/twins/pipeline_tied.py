"""tests/run/pipeline_tied.smp: a two-stage pipeline of a model whose embedding table is tied
(looked up in stage 0, transposed into the logits in stage 1) trained with SGD over 4
micro-batches equals jax.value_and_grad of the same model on the whole batch, step by step
(f32; rtol 1e-4, atol 1e-6): the table's two gradients summed into one update."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "tests/run/pipeline_tied.smp"


def model(p, tokens):
    x = jnp.take(p["emb"], tokens, axis=0).reshape(32, 8)
    h = jnp.tanh(x @ p["w1"])
    g = jnp.tanh(h @ p["w2"]) + h
    return g @ p["emb"].T


def loss(p, tokens, targets):
    logits = model(p, tokens)
    picked = jax.nn.one_hot(targets.reshape(32), 16) * jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.sum(picked, axis=-1))


def check(t):
    p = {"emb": twin.normal((16, 8), 1) * 0.5, "w1": twin.normal((8, 8), 2) * 0.3, "w2": twin.normal((8, 8), 3) * 0.3}
    seq = (twin.uniform((8, 5), 4) * 16.0).astype(jnp.int32)
    tokens, targets = seq[:, 0:4], seq[:, 1:5]
    step = jax.jit(jax.value_and_grad(loss))
    for k in range(3):
        l, g = step(p, tokens, targets)
        t.close("loss", l, rtol=1e-4, atol=1e-6, index=k)
        p = jax.tree_util.tree_map(lambda w, d: w - 0.5 * d, p, g)
    t.close("emb[3]", p["emb"][3], rtol=1e-4, atol=1e-6)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
