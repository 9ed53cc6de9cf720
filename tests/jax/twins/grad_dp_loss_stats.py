"""tests/run/grad_dp_loss_stats.smp: the gradient of the data-parallel loss of JAX's note
on efficient transposition (the --stats table is the golden test's business). Against JAX: d loss / d w with rtol 1e-4,
atol 1e-5 (one small forward and backward pass in f32); "agrees with one device" is JAX's
own max |grad(sharded) - grad(host)| < 1e-5. The _naive and _untyped variants print the same
labels and are checked by this same code (_untyped with JAX's check_vma=False, as
--no-check-vma)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap, f32

PROGRAM = "tests/run/grad_dp_loss_stats.smp"
m = twin.mesh("batch", 4)


def dense(x, w, b):  # stdlib/nn.smp
    return x @ w + b


def loss_body(w, b, inputs, targets):
    predictions = jnp.tanh(dense(inputs, w, b))
    d = predictions - targets
    return jax.lax.pmean(jnp.mean(jnp.sum(d * d, axis=-1)), "batch")


SPECS = ((P(), P(), P("batch"), P("batch")), P())


def host_loss(w, b, inputs, targets):
    d = jnp.tanh(dense(inputs, w, b)) - targets
    return jnp.mean(jnp.sum(d * d, axis=-1))


def check(t, check_vma=True):
    loss = smap(m, *SPECS, check_vma=check_vma)(loss_body)
    w = twin.normal((3, 2), 1) * 0.5
    b = f32([0.1, -0.2])
    inputs = twin.uniform((8, 3), 2)
    targets = twin.normal((8, 2), 3)
    g = jax.grad(loss)(w, b, inputs, targets)
    t.close("d loss / d w", g)
    host = jax.grad(host_loss)(w, b, inputs, targets)
    t.equal("agrees with one device", jnp.max(jnp.abs(g - host)) < 1e-5)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
