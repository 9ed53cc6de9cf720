"""The Transformer block training step of bench/transformer/run.py in JAX jit: prints the mean
step time in ms. Argument: threads (1: XLA single-threaded, run pinned to one core; else XLA's
default thread pool on the cores it may use)."""
import os, sys, time
THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 1
if THREADS == 1:
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
import jax, jax.numpy as jnp, numpy as np
B, T, D, F, V = 16, 64, 256, 1024, 512
def layer_norm(x, g, b):
    d = x - jnp.mean(x, -1, keepdims=True)
    return d / jnp.sqrt(jnp.mean(d * d, -1, keepdims=True) + 1e-5) * g + b
def gelu(x):
    return 0.5 * x * (1 + jnp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
def loss(p, tokens):
    emb, pos, g1, b1_, wq, wk, wv, wo, g2, b2_, w1, b1, w2, b2 = p
    ids, targets = tokens[:, :T], tokens[:, 1:].reshape(-1)
    x = emb[ids] + pos
    h = layer_norm(x, g1, b1_).reshape(B * T, D)
    q, k, v = [(h @ w).reshape(B, T, D) for w in (wq, wk, wv)]
    s = q @ jnp.transpose(k, (0, 2, 1)) / jnp.sqrt(jnp.float32(D))
    a = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -1e9), -1) @ v
    x = x + (a.reshape(B * T, D) @ wo).reshape(B, T, D)
    u = gelu(layer_norm(x, g2, b2_).reshape(B * T, D) @ w1 + b1)
    x = x + (u @ w2 + b2).reshape(B, T, D)
    logits = x.reshape(B * T, D) @ emb.T
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), targets[:, None], 1))
r = np.random.default_rng(0)
n = lambda *s: jnp.asarray(r.standard_normal(s, np.float32) * 0.05)
p = [n(V, D), n(T, D), jnp.ones(D), jnp.zeros(D), n(D, D), n(D, D), n(D, D), n(D, D), jnp.ones(D),
     jnp.zeros(D), n(D, F), jnp.zeros(F), n(F, D), jnp.zeros(D)]
tokens = jnp.asarray(r.integers(0, V, (B, T + 1)), jnp.int32)
@jax.jit
def step(p, tokens):
    l, g = jax.value_and_grad(loss)(p, tokens)
    return [w - 0.01 * gw for w, gw in zip(p, g)], l
p, l = step(p, tokens); jax.block_until_ready(p)
ts = []
for _ in range(10):
    t0 = time.perf_counter(); p, l = step(p, tokens); jax.block_until_ready(p); ts.append(time.perf_counter() - t0)
print("%.4f" % (np.mean(ts) * 1e3))
