"""tests/run/grad_checks.smp: check_grads of host functions and shmaps. Each printed line is
`check_grads(f, args) < 0.01`; the twin recomputes check_grads' metric with JAX's jvp and vjp
of the same function along the same seeded directions (twin.check_grads_metric), with the
finite difference in float64, and the verdict must be the printed one. The gradients
themselves are printed by tests/run/grad_checks_values.smp and compared with JAX there.
Notes: `collectives` uses pmax, which JAX cannot differentiate: twin.pmax is the max over an
all_gather_invariant (the float64 fd in the metric checks it independently); the cond of
`varying_cond` has a device-varying predicate but no invariant operand and no collective,
the one case JAX's transpose handles (nothing needs a psum inside the branch)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap, f32, iota, pvary

PROGRAM = "tests/run/grad_checks.smp"
lax = jax.lax
m = twin.mesh("i", 4)
xy = twin.mesh(("x", 2), ("y", 2))
RING = [(0, 1), (1, 2), (2, 3), (3, 0)]


def elementwise(x, y):
    a = jnp.exp(x) * jnp.sin(y) / (2.0 + x * x) + jnp.sqrt(y * y + 1.0) - jnp.tanh(x) * jnp.cos(y)
    return jnp.sum(a + jnp.log(1.5 + x * x) + jnp.abs(x - y + 10.0) + jnp.power(y * y + 1.0, x * 0.5))


def reductions(x):
    return (jnp.sum(jnp.max(x, axis=1)) + jnp.mean(jnp.min(x, axis=0) * 3.0) +
            jnp.sum(jnp.maximum(x, 0.1) * jnp.minimum(x, 0.7)))


def shapes(x):
    t = jnp.transpose(jnp.reshape(x, (4, 2)))
    c = jnp.concatenate([t, t * 2.0], axis=0)
    return (jnp.sum(c[1:3, :] * c[0:2, ::1]) + jnp.sum(jnp.expand_dims(x[0], 0) * 2.0) +
            jnp.sum(x[:, None, 1] * x[None, :, 0]))


def matmuls(a, b):
    return jnp.sum(jnp.tanh(a @ b)) + jnp.sum((a @ b) @ jnp.transpose(b))


def slicing(x):
    d = lax.dynamic_slice(x, (1, 0), (2, 2))
    u = lax.dynamic_update_slice(x, d * 3.0, (2, 1))  # start clamped to (2, 0), as in shmapc
    return jnp.sum(u * u) + jnp.sum(d)


def control(x):
    acc = x
    for k in range(3):
        acc = jnp.sin(acc) * 1.5 + x
    acc = lax.cond(jnp.sum(acc) > 0.0, lambda a: a * a, lambda a: -a, acc)
    return jnp.sum(acc)


@smap(m, (P(), P("i")), P())
def data_parallel(w, x):
    return lax.pmean(jnp.sum(jnp.tanh(x * w)), "i")


@smap(m, P("i"), (P(), P("i"), P("i"), P(), P("i"), P("i")))
def collectives(x):
    s = lax.psum(x * x, "i")
    g = lax.all_gather(jnp.sin(x), "i", tiled=True)
    r = lax.psum_scatter(x * 2.0, "i", tiled=True)
    mx = twin.pmax(x, "i")
    p = lax.ppermute(x * x, "i", perm=RING)
    a = lax.all_to_all(x * x, "i", 0, 0, tiled=True)
    return s, g, r, mx, p, a


@smap(xy, (P("x", "y"), P()), (P("x"), P(), P(None, "y")))
def mesh_2d(a, w):
    h = jnp.tanh(a * w)
    return (lax.psum(h, "y"), lax.psum(h * h, ("x", "y")),
            twin.all_gather_invariant(h, "x", axis=0, tiled=True))


@smap(m, P("i"), P("i"))
def varying_cond(x):
    return lax.cond(lax.axis_index("i") % 2 == 0, lambda: jnp.sin(x) * x, lambda: x * x * x)


@smap(m, (P("i"), P()), P())
def loop_in_shmap(x, w):
    acc = pvary(w, ("i",))  # shmapc lifts the carry before the loop (it becomes varying)
    for k in range(3):
        acc = jnp.tanh(acc * x) + lax.ppermute(acc, "i", perm=RING)
    return lax.psum(acc, "i")


def cases():
    """label -> (function, arguments), as main() of the program calls check_grads."""
    x = twin.normal((4, 2), 1) * 0.5
    y = twin.normal((4, 2), 2) * 0.5
    return {
        "elementwise": (elementwise, [x, y]),
        "reductions": (reductions, [x * 3.0 + 1.0]),
        "shapes": (shapes, [x]),
        "matmuls": (matmuls, [x, y.T]),
        "slicing": (slicing, [x]),
        "control": (control, [x]),
        "data parallel": (data_parallel, [f32([0.5, -0.2, 0.1]), twin.normal((8, 3), 3)]),
        "collectives": (collectives, [iota(16) * 0.1 + 0.05]),
        "2-D mesh": (mesh_2d, [x, f32([0.3, -0.7])]),
        "device-varying cond": (varying_cond, [iota(8) * 0.2 + 0.1]),
        "loop in shmap": (loop_in_shmap, [iota(8) * 0.1, f32([0.2, -0.4])]),
    }


def check_verdicts(t, cases):
    for label, (f, args) in cases.items():
        metric, fd, fwd, rev = twin.check_grads_metric(f, args)
        t.equal(label, metric < 0.01, how="JAX jvp/vjp vs float64 fd: %.2g (fd %.6g, jvp %.6g, vjp %.6g)"
                % (metric, fd, fwd, rev))


def check(t):
    check_verdicts(t, cases())


if __name__ == "__main__":
    twin.main(PROGRAM, check)
