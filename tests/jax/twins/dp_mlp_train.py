"""samples/dp_mlp_train.smp: a data-parallel MLP trained with SGD (value_and_grad through the
shmap). Against JAX: the loss at each of the 10 steps and the final loss, with rtol 1e-4 and
atol 1e-7 (the losses fall to 0.04, so the default atol 1e-5 would hide a 2.5e-4 relative
error). Ten f32 SGD steps whose rounding differs between shmapc's and XLA's kernels stay
within about 1e-6 relative here (observed), well inside that."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap

PROGRAM = "samples/dp_mlp_train.smp"
m = twin.mesh("batch", 4)


def mse(pred, target):  # stdlib/nn.smp
    d = pred - target
    return jnp.mean(d * d)


@smap(m, (P(), P(), P(), P("batch"), P("batch")), P())
def loss(w1, b1, w2, x, y):
    h = jnp.tanh(x @ w1 + b1)
    return jax.lax.pmean(mse(h @ w2, y), "batch")


def check(t):
    x = twin.uniform((16, 2), 1) * 2.0 - 1.0
    y = (jnp.sin(2.0 * x[:, 0]) + 0.5 * x[:, 1]).reshape(16, 1)
    w1 = twin.normal((2, 8), 2)
    b1 = jnp.zeros(8, jnp.float32)
    w2 = twin.normal((8, 1), 3) * 0.5
    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
    for step in range(10):
        l, (g1, gb1, g2) = value_and_grad(w1, b1, w2, x, y)
        t.close("loss", l, rtol=1e-4, atol=1e-7, index=step)
        w1 = w1 - 0.2 * g1
        b1 = b1 - 0.2 * gb1
        w2 = w2 - 0.2 * g2
    t.close("final loss", loss(w1, b1, w2, x, y), rtol=1e-4, atol=1e-7)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
