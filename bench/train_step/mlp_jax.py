"""The MLP training step of bench/train_step/run.py in JAX; prints the mean step time in ms.
    mlp_jax.py [STEPS]      jax.jit on one CPU device, one thread
    mlp_jax.py STEPS N      as shmapc's program writes it: jax.jit of the gradient of a
                            shard_map'd loss on a mesh of N host CPU devices (the batch split
                            over "data", the parameters replicated, pmean of the loss); XLA runs
                            the devices on its own threads (run.py pins nothing here)"""
import os
import sys
import time
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
N = int(sys.argv[2]) if len(sys.argv) > 2 else None
if N:
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=%d" % N
else:
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402

B, D, H = 256, 512, 1024
rng = np.random.default_rng(0)
x, y = jnp.asarray(rng.standard_normal((B, D), np.float32)), jnp.asarray(rng.standard_normal((B, D), np.float32))
p = [jnp.asarray(rng.standard_normal((D, H), np.float32) * 0.05), jnp.zeros(H, jnp.float32),
     jnp.asarray(rng.standard_normal((H, D), np.float32) * 0.05), jnp.zeros(D, jnp.float32)]


def local_loss(w1, b1, w2, b2, x, y):
    h = jnp.maximum(x @ w1 + b1, 0)
    d = h @ w2 + b2 - y
    return jax.lax.pmean(jnp.mean(d * d), "data") if N else jnp.mean(d * d)


if N:
    try:
        shard_map = jax.shard_map
    except AttributeError:  # older JAX
        from jax.experimental.shard_map import shard_map
    mesh = Mesh(np.array(jax.devices()[:N]), ("data",))
    loss = shard_map(local_loss, mesh=mesh, in_specs=(P(), P(), P(), P(), P("data"), P("data")), out_specs=P())
else:
    loss = local_loss


@jax.jit
def step(p, x, y):
    g = jax.grad(lambda p: loss(*p, x, y))(p)
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
