"""tests/run/grad_checks_samples.smp: check_grads of the shmap functions of every sample. As
grad_checks.py: check_grads' metric recomputed with JAX's jvp/vjp along the same directions,
fd in float64; the verdict must be the printed one (the gradients are compared with JAX in
grad_checks_values.smp). `reductions` uses twin.pmax/pmin (JAX's have no gradient); the
functions of collective_matmul_grad, dp_mlp_train and megatron_mlp are those twins' own."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap, f32, iota
from grad_checks import check_verdicts
import collective_matmul_grad as cmg
import dp_mlp_train
import megatron_mlp

PROGRAM = "tests/run/grad_checks_samples.smp"
lax = jax.lax
m = twin.mesh("i", 4)
batch_mesh = twin.mesh("batch", 4)
xy = twin.mesh(("x", 2), ("y", 4))
fidx = lambda axes: lax.axis_index(axes).astype(jnp.float32)  # cast(axis_index(...), f32)


@smap(m, P("i"), (P(), P(), P(), P()))
def reductions(x):
    return lax.psum(x, "i"), lax.pmean(x, "i"), twin.pmax(x, "i"), twin.pmin(x, "i")


@smap(xy, P("x", "y"), P("x", None))
def sum_over_y(a):
    return lax.psum(a, "y")


@smap(xy, P("x", "y"), P(None, "y"))
def sum_over_x(a):
    return lax.psum(a, "x")


@smap(xy, P("x", "y"), P())
def sum_over_both(a):
    return lax.psum(a, ("x", "y"))


@smap(m, P("i"), (P(), P(), P("i")))
def gather(x):
    stacked = twin.all_gather_invariant(x, "i", axis=0, tiled=False)
    flat = twin.all_gather_invariant(x, "i", axis=0, tiled=True)
    scaled = lax.all_gather(x, "i", tiled=True) * fidx("i")
    return stacked, flat, scaled


@smap(m, P(), P("i"))
def scatter_tiled(x):
    scaled = x * (lax.axis_index("i") + 1).astype(jnp.float32)
    return lax.psum_scatter(scaled, "i", scatter_dimension=0, tiled=True)


@smap(m, P(None, "i"), P("i"))
def scatter_untiled(x):
    return lax.psum_scatter(x, "i")


@smap(m, P("i"), P(None, "i"))
def transpose_blocks(x):
    return lax.all_to_all(x, "i", 1, 0, tiled=True)


@smap(m, P("i"), (P("i"), P("i")))
def shifts(x):
    rotated = lax.ppermute(x, "i", perm=[(0, 1), (1, 2), (2, 3), (3, 0)])
    partial = lax.ppermute(x, "i", perm=[(0, 3), (3, 0)])
    return rotated, partial


@smap(xy, P(("x", "y")), (P(("x", "y")), P()))
def axis_index_weights(v):
    ix, iy, ixy, iyx = fidx("x"), fidx("y"), fidx(("x", "y")), fidx(("y", "x"))
    w = jnp.sin(v * (ix + 1.0)) * (iy + 0.5) + v * v * ixy * 0.25 - jnp.tanh(v) * iyx
    return w, lax.psum(w * v, ("x", "y"))


@smap(xy, P(("x", "y")), P(None))
def slice_and_average(x):
    return lax.pmean(x[:4], ("x", "y"))


@smap(xy, (P("x", "y"), P(None, "y")), P("x", "y"))
def matmul_allgather(lhs, rhs):
    return lax.all_gather(lhs, "y", axis=1, tiled=True) @ rhs


@smap(xy, (P("x", "y"), P(None, "y")), P("x", "y"))
def matmul_collective(lhs, rhs):
    me = lax.axis_index("y")
    accum = jnp.zeros((4, 2), jnp.float32)
    for i in range(3):
        chunk = lax.dynamic_slice(rhs, (((me + i) % 4) * 4, jnp.int32(0)), (4, 2))
        accum = accum + lhs @ chunk
        lhs = lax.ppermute(lhs, "y", perm=[(0, 3), (1, 0), (2, 1), (3, 2)])
    last = lax.dynamic_slice(rhs, (((me - 1) % 4) * 4, jnp.int32(0)), (4, 2))
    return accum + lhs @ last


@smap(batch_mesh, (P(), P(), P("batch"), P("batch")), P())
def dp_loss(w, b, inputs, targets):
    predictions = jnp.tanh(inputs @ w + b)
    local_loss = jnp.mean(jnp.sum(predictions - targets, axis=-1))
    return lax.pmean(local_loss, "batch")


def cases():
    x8 = f32([3.0, -1.0, 0.5, 2.0, -2.5, 1.2, 1.5, 0.25])
    a44 = twin.normal((4, 4), 11)
    a = iota(128).reshape(8, 16) / 64.0 - 1.0
    w = iota(128).reshape(16, 8) / 32.0 - 2.0
    sa = iota(32).reshape(4, 8) / 32.0
    sw = iota(32).reshape(8, 4) / 16.0 - 1.0
    mx = twin.uniform((16, 2), 1) * 2.0 - 1.0
    my = (np.sin(2.0 * mx[:, 0]) + 0.5 * mx[:, 1]).reshape(16, 1)
    tx = iota(8).reshape(2, 4) / 8.0 - 0.3
    tw1 = np.sin(iota(32)).reshape(4, 8)
    tw2 = np.cos(iota(32)).reshape(8, 4)
    return {
        "psum: psum, pmean, pmax, pmin": (reductions, [x8]),
        "psum_2d: sum_over_y": (sum_over_y, [a44]),
        "psum_2d: sum_over_x": (sum_over_x, [a44]),
        "psum_2d: sum_over_both": (sum_over_both, [a44]),
        "all_gather: gather": (gather, [x8]),
        "psum_scatter: scatter_tiled": (scatter_tiled, [iota(8) * 0.25 - 1.0]),
        "psum_scatter: scatter_untiled": (scatter_untiled, [a44]),
        "all_to_all: transpose_blocks": (transpose_blocks, [a44]),
        "ppermute: shifts": (shifts, [x8]),
        "axis_index: indices as weights": (axis_index_weights, [twin.normal((16,), 12)]),
        "slice_and_average": (slice_and_average, [twin.normal((512,), 13)]),
        "collective_matmul: all_gather version": (matmul_allgather, [a, w]),
        "collective_matmul: ppermute-in-a-loop version": (matmul_collective, [a, w]),
        "collective_matmul_grad: all_gather version": (cmg.matmul_allgather, [sa, sw]),
        "collective_matmul_grad: ppermute-in-a-loop version": (cmg.matmul_collective, [sa, sw]),
        "collective_matmul_grad: loss_allgather": (cmg.loss_allgather, [sa, sw]),
        "collective_matmul_grad: loss_collective": (cmg.loss_collective, [sa, sw]),
        "dp_loss: loss": (dp_loss, [twin.normal((3, 2), 1) * 0.5, f32([0.1, -0.2]),
                                    twin.uniform((8, 3), 2), twin.normal((8, 2), 3)]),
        "dp_mlp_train: loss": (dp_mlp_train.loss, [twin.normal((2, 8), 2), twin.normal((8,), 4) * 0.1,
                                                   twin.normal((8, 1), 3) * 0.5, mx, my]),
        "megatron_mlp: mlp": (megatron_mlp.mlp, [tx, tw1, tw2]),
        "megatron_mlp: objective": (megatron_mlp.objective, [tx, tw1, tw2]),
    }


def check(t):
    check_verdicts(t, cases())


if __name__ == "__main__":
    twin.main(PROGRAM, check)
