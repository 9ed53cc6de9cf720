"""tests/run/jit_grad_checks.smp: check_grads of partitioned jit functions. The twin computes
check_grads' metric with JAX's jvp and vjp of the same functions under jax.jit with the same
shardings (with_sharding_constraint for sharding_constraint), along the same seeded
directions, the finite difference in float64 (twin.check_grads_metric); the verdict must be
the printed one."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, f32, iota
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_grad_checks.smp"
m = twin.mesh(("X", 2), ("Y", 2))


def S(*spec):
    return NamedSharding(m, P(*spec))


def jit(f, ins):
    return jax.jit(f, in_shardings=ins, out_shardings=S())


layer = jit(lambda x, w: jnp.sum(jnp.tanh(x @ w)), (S("X", "Y"), S("Y", None)))


def mlp_fn(x, w1, w2):
    y = jnp.tanh(x @ w1) @ w2
    return jnp.mean(y * y)


mlp = jit(mlp_fn, (S("X", None), S(None, "Y"), S("Y", None)))
moved = jit(lambda a, b: jnp.sum(jnp.sin(a + b) * a), (S("X", None), S("Y", None)))
relayout = jit(lambda a: jnp.sum(jnp.cos(jax.lax.with_sharding_constraint(a * a, S(None, "X")))), (S("X", None),))


def constrained_fn(w_out, w_in, x):
    hidden = jax.lax.with_sharding_constraint(x @ w_in.T, S("X", "Y"))
    return jnp.sum(jnp.tanh(hidden @ w_out.T))


constrained = jit(constrained_fn, (S(), S(), S("X", None)))


def down_fn(t, w):
    out = jax.lax.with_sharding_constraint(t @ w, S("X", "Y"))
    return jnp.sum(out * out)


down = jit(down_fn, (S("X", "Y"), S("Y", None)))
shard_means = jit(lambda a: jnp.sum(jnp.exp(jnp.mean(a.reshape(2, 4, 4), axis=1))), (S("X", "Y"),))


def block_fn(inp, w_in, w_out):
    out = jax.lax.with_sharding_constraint(jnp.tanh(inp @ w_in) @ w_out, S("X", "Y"))
    return jnp.sum(out * out)


block = jit(block_fn, (S("X", "Y"), S(None, "Y"), S("Y", None)))


def moe_fn(w, a):
    mask = jax.nn.one_hot((jnp.arange(8, dtype=jnp.int32) * 3) % 4, 4).T
    out = (mask[:, :, None] * a[None]) @ w
    return jnp.sum(jnp.sin(jnp.sum(mask[:, :, None] * out, axis=0)))


moe = jit(moe_fn, (S("X", None, "Y"), S("X", "Y")))


def cases():
    x = f32(jnp.sin(iota(128))).reshape(8, 16)
    w = f32(jnp.cos(iota(128))).reshape(16, 8) * 0.3
    a = f32(jnp.sin(iota(32).reshape(8, 4) * 0.7))
    return {
        "layer": (layer, [x, w]),
        "mlp": (mlp, [x, w, f32(jnp.cos(iota(32))).reshape(8, 4)]),
        "moved": (moved, [a, a * 0.5 + 0.1]),
        "relayout": (relayout, [a]),
        "constrained": (constrained, [w.T, w, f32(jnp.sin(iota(64))).reshape(8, 8)]),
        "down": (down, [x, w]),
        "shard_means": (shard_means, [a]),
        "block": (block, [x, w, w.T]),
        "moe": (moe, [f32(jnp.sin(iota(512))).reshape(4, 8, 16), f32(jnp.cos(iota(64))).reshape(8, 8)]),
    }


def check(t):
    for label, (f, args) in cases().items():
        metric, fd, fwd, rev = twin.check_grads_metric(f, args)
        t.equal(label, metric < 0.01, how="JAX jvp/vjp vs float64 fd: %.2g" % metric)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
