"""samples/collective_matmuls.smp: the all-gather and reduce-scatter collective matmuls, one-
and two-directional. Against JAX: the same six shard_map functions (ppermute rings in
for-loops), their outputs and the gradients of sum(out^2) by jax.grad with rtol 1e-4; every
"= plain" line is recomputed from JAX's values with the sample's own test (max |x - y| <=
1e-5 max |y|); then the sample's six SGD steps through the bidirectional versions and their
losses, all on data/collective_matmuls.npz."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap

PROGRAM = "samples/collective_matmuls.smp"
m = twin.mesh(("x", 2), ("y", 4))
LEFT = [(1, 0), (2, 1), (3, 2), (0, 3)]
RIGHT = [(0, 1), (1, 2), (2, 3), (3, 0)]
AG = ((P("x", "y"), P(None, "y")), P("x", "y"))
RS = ((P("x", "y"), P("y", None)), P("x", "y"))
ds = jax.lax.dynamic_slice


@smap(m, *AG)
def ag_plain(lhs, rhs):
    return jax.lax.all_gather(lhs, "y", axis=1, tiled=True) @ rhs


@smap(m, *AG)
def ag_unidirectional(lhs, rhs):
    me = jax.lax.axis_index("y")
    block, out = lhs, lhs @ ds(rhs, (me * 4, 0), (4, 2))
    for i in range(1, 4):
        block = jax.lax.ppermute(block, "y", LEFT)
        out = out + block @ ds(rhs, (((me + i) % 4) * 4, 0), (4, 2))
    return out


@smap(m, *AG)
def ag_bidirectional(lhs, rhs):
    me = jax.lax.axis_index("y")
    left, right = lhs[:, 0:2], lhs[:, 2:4]
    out = lhs @ ds(rhs, (me * 4, 0), (4, 2))
    for i in range(1, 4):
        left = jax.lax.ppermute(left, "y", LEFT)
        right = jax.lax.ppermute(right, "y", RIGHT)
        out = out + left @ ds(rhs, (((me + i) % 4) * 4, 0), (2, 2)) \
            + right @ ds(rhs, (((me - i) % 4) * 4 + 2, 0), (2, 2))
    return out


@smap(m, *RS)
def rs_plain(t, w2):
    return jax.lax.psum_scatter(t @ w2, "y", scatter_dimension=1, tiled=True)


@smap(m, *RS)
def rs_unidirectional(t, w2):
    me = jax.lax.axis_index("y")
    acc = t @ ds(w2, (0, ((me + 1) % 4) * 2), (4, 2))
    for i in range(1, 4):
        acc = jax.lax.ppermute(acc, "y", LEFT) + t @ ds(w2, (0, ((me + 1 + i) % 4) * 2), (4, 2))
    return acc


@smap(m, *RS)
def rs_bidirectional(t, w2):
    me = jax.lax.axis_index("y")
    acc_l = t @ ds(w2, (0, ((me + 1) % 4) * 2), (4, 1))
    acc_r = t @ ds(w2, (0, ((me - 1) % 4) * 2 + 1), (4, 1))
    for i in range(1, 4):
        acc_l = jax.lax.ppermute(acc_l, "y", LEFT) + t @ ds(w2, (0, ((me + 1 + i) % 4) * 2), (4, 1))
        acc_r = jax.lax.ppermute(acc_r, "y", RIGHT) + t @ ds(w2, (0, ((me - 1 - i) % 4) * 2 + 1), (4, 1))
    return jnp.concatenate([acc_l, acc_r], axis=1)


def close(x, y):
    return bool(jnp.max(jnp.abs(x - y)) <= 1e-5 * jnp.max(jnp.abs(y)))


def sq(f):
    return jax.grad(lambda p, q: jnp.sum(f(p, q) ** 2), argnums=(0, 1))


def check(t):
    data = np.load(os.path.join(twin.ROOT, "samples", "data", "collective_matmuls.npz"))
    a, w, tt, w2, y, y2 = (jnp.asarray(data[k]) for k in ("a", "w", "t", "w2", "y", "y2"))
    out = ag_plain(a, w)
    t.close("all-gather matmul", out)
    t.equal("unidirectional = plain", close(ag_unidirectional(a, w), out))
    t.equal("bidirectional = plain", close(ag_bidirectional(a, w), out))
    da, dw = sq(ag_plain)(a, w)
    t.close("all-gather d/da", da)
    t.close("all-gather d/dw", dw)
    for label, f in (("unidirectional gradients = plain", ag_unidirectional),
                     ("bidirectional gradients = plain", ag_bidirectional)):
        ga, gw = sq(f)(a, w)
        t.equal(label, close(ga, da) and close(gw, dw))
    out2 = rs_plain(tt, w2)
    t.close("reduce-scatter matmul", out2)
    t.equal("rs unidirectional = plain", close(rs_unidirectional(tt, w2), out2))
    t.equal("rs bidirectional = plain", close(rs_bidirectional(tt, w2), out2))
    dt, dw2 = sq(rs_plain)(tt, w2)
    t.close("reduce-scatter d/dt", dt)
    t.close("reduce-scatter d/dw2", dw2)
    for label, f in (("rs unidirectional gradients = plain", rs_unidirectional),
                     ("rs bidirectional gradients = plain", rs_bidirectional)):
        gt, gw2 = sq(f)(tt, w2)
        t.equal(label, close(gt, dt) and close(gw2, dw2))

    # The sample's training: SGD (lr 0.5) through the bidirectional versions.
    def fit_loss(w, w2):
        return jnp.mean((ag_bidirectional(a, w) - y) ** 2) + jnp.mean((rs_bidirectional(tt, w2) - y2) ** 2)

    step_grad = jax.jit(jax.value_and_grad(fit_loss, argnums=(0, 1)))
    for step in range(1, 7):
        l, (gw, gw2) = step_grad(w, w2)
        t.equal("step", step, index=step - 1)
        t.close("train loss", l, index=step - 1)
        w, w2 = w - 0.5 * gw, w2 - 0.5 * gw2
    t.close("final loss", fit_loss(w, w2))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
