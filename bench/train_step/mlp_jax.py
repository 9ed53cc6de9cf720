"""The MLP training step of bench/train_step/run.py with jax.jit on one CPU device (one
thread): prints the mean step time in ms."""
import os
import sys
import time
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
import jax
import jax.numpy as jnp
import numpy as np

B, D, H = 256, 512, 1024
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
rng = np.random.default_rng(0)
x, y = jnp.asarray(rng.standard_normal((B, D), np.float32)), jnp.asarray(rng.standard_normal((B, D), np.float32))
p = [jnp.asarray(rng.standard_normal((D, H), np.float32) * 0.05), jnp.zeros(H, jnp.float32),
     jnp.asarray(rng.standard_normal((H, D), np.float32) * 0.05), jnp.zeros(D, jnp.float32)]


def loss(p, x, y):
    w1, b1, w2, b2 = p
    h = jnp.maximum(x @ w1 + b1, 0)
    return jnp.mean((h @ w2 + b2 - y) ** 2)


@jax.jit
def step(p, x, y):
    g = jax.grad(loss)(p, x, y)
    return [w - 0.01 * gw for w, gw in zip(p, g)]


p = step(p, x, y)
jax.block_until_ready(p)
times = []
for _ in range(steps):
    t0 = time.perf_counter()
    p = step(p, x, y)
    jax.block_until_ready(p)
    times.append(time.perf_counter() - t0)
print("%.4f" % (np.mean(times) * 1e3))
