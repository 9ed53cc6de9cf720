"""samples/rooted_training.smp: the dataset and first weights device 0 draws (twin.normal
/ uniform: shm_rng, bit for bit), 20 steps of gradient descent with JAX's gradient of
the mean squared error, and device 0's report. JAX's lax.pbroadcast(x, axis, source) has no
CPU lowering ("MLIR translation rule for primitive 'pbroadcast' not found for platform cpu"),
and JAX has no rooted reduce, gather or scatter, so the twin computes on the global arrays,
where scattering device 0's draws gives each device its rows and broadcasting its weights
gives every device the same."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "samples/rooted_training.smp"


def check(t):
    xs = jnp.asarray(twin.normal((32, 8), 0))
    w_true = jnp.asarray(twin.uniform((8,), 100)) - 0.5
    ys = xs @ w_true + jnp.asarray(twin.normal((32,), 300)) * 0.1
    w0 = jnp.asarray(twin.normal((8,), 200)) * 0.1

    def loss(w):
        return jnp.mean((xs @ w - ys) ** 2)

    w = w0
    for _ in range(20):
        w = w - 0.5 * jax.grad(loss)(w)
    errors = (xs @ w - ys) ** 2
    t.close("initial weights", w0)
    t.close("loss before", loss(w0))
    t.close("loss after", loss(w))
    t.close("errors on device 0, first 8", errors[:8])
    t.close("what the other devices hold", 0.0)
    t.close("sum of errors on device 0", jnp.array([jnp.sum(errors), 0.0, 0.0, 0.0]))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
