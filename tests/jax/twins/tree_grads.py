"""tests/run/tree_grads.smp: grad, value_and_grad, vjp and jvp with respect to a record with a
nested tuple, against jax.grad / jax.vjp / jax.jvp of the same dict pytree (f32; rtol 1e-4,
atol 1e-5), and a second-order gradient through a tree gradient."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "tests/run/tree_grads.smp"


def loss(p, x):
    h = jnp.tanh(x @ p["w"] + p["b"])
    return jnp.sum(h * h) + jnp.sum(p["extra"][0] * p["extra"][1])


def with_features(p, x):
    return loss(p, x), {"y": x @ p["w"], "z": jnp.exp(p["b"])}


def grad_norm(x, p):
    g = jax.grad(loss)(p, x)
    return jnp.sum(g["w"] * g["w"]) + jnp.sum(g["b"] * g["b"]) + jnp.sum(g["extra"][0] * g["extra"][0])


def check(t):
    f32 = jnp.float32
    p = {"w": jnp.array([[0.1, 0.2], [0.3, -0.4]], f32), "b": jnp.array([0.5, -0.5], f32),
         "extra": (jnp.ones(2, f32), jnp.array([2.0, 3.0], f32))}
    x = jnp.array([[1.0, 2.0], [-0.5, 0.25]], f32)
    t.close_tree("grad", jax.grad(loss)(p, x))
    v, (gp, gx) = jax.value_and_grad(loss, argnums=(0, 1))(p, x)
    t.close("value", v)
    t.close_tree("gp", gp)
    t.close("gx", gx)
    (l, feats), pullback = jax.vjp(lambda q: with_features(q, x), p)
    t.close_tree("feats", feats)
    ct = {"y": jnp.array([[1.0, 0.0], [0.0, -1.0]], f32), "z": jnp.array([0.5, 0.25], f32)}
    (gvjp,) = pullback((jnp.asarray(2.0, f32), ct))
    t.close_tree("vjp", gvjp)
    _, (tl, tf) = jax.jvp(with_features, (p, x), (p, jnp.array([[0.0, 1.0], [1.0, 0.0]], f32)))
    t.close("jvp loss", tl)
    t.close_tree("jvp feats", tf)
    t.close("second order", jax.grad(grad_norm)(x, p))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
