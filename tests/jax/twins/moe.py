"""samples/moe.smp: top-2 mixture of experts with all_to_all dispatch, dense and ragged.
Against JAX: the dense layer written with shard_map and the same dispatch (tiled all_to_all
of a [experts, 16, D] buffer); its output, loss and the gradients (jax.value_and_grad) with
rtol 1e-4; the ragged layer written with lax.while_loop around the all_to_all, which JAX too
can only differentiate in forward mode: its jvp (jax.jvp) and the dense jvp against the
printed ones; then the sample's six SGD steps and their losses, all on data/moe.npz.
(tests/numpy/check_samples.py checks the same values against the layer's definition in
float64 and finite differences.)"""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap

PROGRAM = "samples/moe.smp"
m = twin.mesh("x", 4)
SPECS = (P("x"), P(), P("x"), P("x"))


def gelu(x):
    return 0.5 * x * (1.0 + jnp.tanh(np.float32(np.sqrt(2.0 / np.pi)) * (x + 0.044715 * x ** 3)))


def route(a, wg):
    gates, experts = jax.lax.top_k(jax.nn.softmax(a @ wg, axis=-1), 2)
    return gates, experts.reshape(16)


def combine(y, gates):
    return jnp.sum(y.reshape(8, 2, 8) * gates[:, :, None], axis=1)


def expert(h, w1, w2):
    return gelu(h @ w1[0]) @ w2[0]


def a2a(x):
    return jax.lax.all_to_all(x, "x", 0, 0, tiled=True)


@smap(m, SPECS, P("x"))
def moe_dense(a, wg, w1, w2):
    gates, e = route(a, wg)
    oh = jax.nn.one_hot(e, 4)
    slot = jnp.sum((jnp.cumsum(oh, axis=0) - oh) * oh, axis=1).astype(jnp.int32)
    dispatch = jax.nn.one_hot(e * 16 + slot, 64)
    rows = a[jnp.arange(16) // 2]
    mine = a2a((dispatch.T @ rows).reshape(4, 16, 8))
    back = a2a(expert(mine.reshape(64, 8), w1, w2).reshape(4, 16, 8))
    return combine(dispatch @ back.reshape(64, 8), gates)


@smap(m, SPECS, P("x"))
def moe_ragged(a, wg, w1, w2):
    gates, e = route(a, wg)
    order = jnp.argsort(e, stable=True)
    count = jnp.sum(jax.nn.one_hot(e, 4), axis=0).astype(jnp.int32)
    start = jnp.cumsum(count) - count
    token = jnp.arange(16) // 2
    lane = jnp.arange(2)[None, :]
    busiest = twin.pmax(jnp.max(count), "x")

    def body(c):
        y, done = c
        k = done + lane
        valid = (k < count[:, None])[:, :, None]
        which = order[jnp.clip(start[:, None] + k, 0, 15)]
        buf = jnp.where(valid, a[token[which]], 0.0)
        out = expert(a2a(buf).reshape(8, 8), w1, w2).reshape(4, 2, 8)
        back = jnp.where(valid, a2a(out), 0.0)
        return y.at[which.reshape(8)].add(back.reshape(8, 8)), done + 2

    # JAX wants the carry's variance written out (pvary); shmapc finds it by a fixed point.
    y, _ = jax.lax.while_loop(lambda c: c[1] < busiest, body,
                              (twin.pvary(jnp.zeros((16, 8), jnp.float32), "x"), jnp.int32(0)))
    return combine(y, gates)


def check(t):
    data = np.load(os.path.join(twin.ROOT, "samples", "data", "moe.npz"))
    a, wg, w1, w2, target, ta, tw1 = (jnp.asarray(data[k]) for k in ("a", "wg", "w1", "w2", "target", "ta", "tw1"))
    dense = moe_dense(a, wg, w1, w2)
    t.close("dense", dense)
    t.equal("ragged = dense", bool(jnp.max(jnp.abs(moe_ragged(a, wg, w1, w2) - dense)) < 1e-6))

    def loss(layer):
        return lambda a, wg, w1, w2: jnp.mean((layer(a, wg, w1, w2) - target) ** 2)

    l, (da, dwg, dw1, dw2) = jax.value_and_grad(loss(moe_dense), argnums=(0, 1, 2, 3))(a, wg, w1, w2)
    t.close("loss", l)
    t.close("d/da", da, atol=1e-7)  # gradients of 1e-3: the default atol would hide 1%
    t.close("d/dwg", dwg, atol=1e-7)
    t.close("d/dw1", dw1, atol=1e-7)
    t.close("d/dw2", dw2, atol=1e-7)
    tangents = (ta, jnp.zeros((8, 4), jnp.float32), tw1, jnp.zeros((4, 16, 8), jnp.float32))
    t.close("jvp dense", jax.jvp(loss(moe_dense), (a, wg, w1, w2), tangents)[1])
    t.close("jvp ragged", jax.jvp(loss(moe_ragged), (a, wg, w1, w2), tangents)[1])
    # The sample's training: SGD (lr 1) on wg, w1, w2 with the dense layer's gradients.
    step_grad = jax.jit(jax.value_and_grad(loss(moe_dense), argnums=(1, 2, 3)))
    for step in range(1, 7):
        l, (gwg, gw1, gw2) = step_grad(a, wg, w1, w2)
        t.equal("step", step, index=step - 1)
        t.close("train loss", l, index=step - 1)
        wg, w1, w2 = wg - gwg, w1 - gw1, w2 - gw2
    t.close("final loss", loss(moe_dense)(a, wg, w1, w2))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
