"""tests/run/stdlib_nn.smp: stdlib/nn.smp's activations, logsumexp, log_softmax,
cross_entropy, layer_norm, rms_norm, embedding, causal attention, dropout (uniform draws from the program's own generator), the gradients of two losses
built from them, and SGD / Adam / AdamW steps (the update formulas written out, as optax's
adam / adamw with eps added outside the square root). Against JAX (f32; rtol 1e-4,
atol 1e-5)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, iota

PROGRAM = "tests/run/stdlib_nn.smp"


def layer_norm(x, gamma, beta, eps):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * gamma + beta


def rms_norm(x, gamma, eps):
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * gamma


def causal_attention(q, k, v):
    t, d = q.shape
    scores = q @ k.T / jnp.sqrt(jnp.float32(d))
    mask = jnp.tril(jnp.ones((t, t), bool))
    return jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1) @ v


def cross_entropy(logits, labels):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=-1))


def block_loss(x, gamma, beta):
    h = layer_norm(x, gamma, beta, 1e-5)
    a = causal_attention(h, h * 0.5, h)
    return jnp.sum(jax.nn.gelu(a, approximate=True) * jax.nn.silu(h)) + jnp.sum(rms_norm(x, gamma, 1e-6) ** 2)


def adam(w, g, m, v, step, lr, b1, b2, eps, wd=0.0):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * (g * g)
    mhat, vhat = m / (1 - b1 ** step), v / (1 - b2 ** step)
    return w - lr * (mhat / (jnp.sqrt(vhat) + eps) + wd * w), m, v


def check(t):
    x = jnp.sin(iota(12).reshape(3, 4) * 1.3) * 2.0
    t.close("sigmoid", jax.nn.sigmoid(x))
    t.close("gelu", jax.nn.gelu(x, approximate=True))
    t.close("silu", jax.nn.silu(x))
    t.close("logsumexp", jax.scipy.special.logsumexp(x, axis=-1))
    t.close("log_softmax", jax.nn.log_softmax(x))
    labels = jnp.array([3, 0, 1])
    t.close("cross_entropy", cross_entropy(x, labels))
    t.close("d cross_entropy", jax.grad(cross_entropy)(x, labels))
    gamma = jnp.array([1.0, 0.5, 2.0, -1.0], jnp.float32)
    beta = jnp.array([0.0, 0.1, 0.2, 0.3], jnp.float32)
    t.close("layer_norm", layer_norm(x, gamma, beta, 1e-5))
    t.close("rms_norm", rms_norm(x, gamma, 1e-6))
    table = iota(10).reshape(5, 2)
    t.close("embedding", jnp.take(table, jnp.array([[4, 0], [1, 1]]), axis=0))
    t.close("causal_attention", causal_attention(x, x * 0.5, x))
    t.close("block_loss", block_loss(x, gamma, beta))
    gx, gg, gb = jax.jit(jax.grad(block_loss, argnums=(0, 1, 2)))(x, gamma, beta)
    t.close("d block_loss / dx", gx)
    t.close("d block_loss / dgamma", gg)
    t.close("d block_loss / dbeta", gb)
    def dropout(x, rate, seed):  # the program's generator (tests/numpy/shm_rng.py)
        return jnp.where(twin.uniform(x.shape, seed) >= rate, x / (1.0 - rate), 0.0)
    t.close("dropout, seeds 7 and 8", dropout(x, 0.25, 7) + dropout(x, 0.25, 8))
    t.close("dropout, static seed 9", dropout(x, 0.5, 9))
    g = jnp.array([0.5, -1.0, 2.0, 0.0], jnp.float32)
    w = jnp.array([1.0, 2.0, 3.0, 4.0], jnp.float32)
    t.close("sgd", w - 0.1 * g)
    z = jnp.zeros(4, jnp.float32)
    w1, m1, v1 = adam(w, g, z, z, 1.0, 0.1, 0.9, 0.999, 1e-8)
    w2, m2, v2 = adam(w1, g * 2.0, m1, v1, 2.0, 0.1, 0.9, 0.999, 1e-8)
    t.close("adam w", w2)
    t.close("adam m", m2)
    t.close("adam v", v2)
    t.close("adamw w", adam(w, g, z, z, 1.0, 0.1, 0.9, 0.999, 1e-8, wd=0.01)[0])


if __name__ == "__main__":
    twin.main(PROGRAM, check)
