"""tests/run/grad_checks_indexing.smp: check_grads of the indexing primitives (take / x[idx] /
take_along_axis, scatter_add / x.at[].add, cumsum, sort / top_k / argmax, pow / clip / where /
one_hot, scan, and top_k with all_to_all in a shmap). Each printed line is
`check_grads(f, args) < 0.01`; the twin recomputes check_grads' metric with JAX's jvp and vjp
along the same seeded directions, the finite difference in float64 (twin.check_grads_metric),
and the verdict must be the printed one."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/grad_checks_indexing.smp"
m = twin.mesh("i", 4)
ia = jnp.array


def gathers(x, v):
    a = jnp.take(x, ia([2, 0, 3, 2]), axis=1)
    b = x[ia([1, 1, 0])]
    c = jnp.take_along_axis(x, ia([[0, 3], [1, 1], [2, 0]]), axis=1)
    return jnp.sum(a * a) + jnp.sum(jnp.sin(b)) + jnp.sum(c * 3.0) + jnp.sum(v[ia([0, 2, 2])] * x[0, 0:3])


def scatters(x, v):
    s = x.at[ia([1, 0, 1])].add(v.reshape(3, 1) * x[0:3, 0:4])
    t = x.at[:, ia([3, 3])].add(x[:, 0:2] * v[0])
    return jnp.sum(s * s) + jnp.sum(jnp.tanh(t))


def scans(x, v):
    c = jnp.cumsum(x, axis=1)
    r = jnp.cumsum(x * v[1], axis=0)
    return jnp.sum(c * c) + jnp.sum(r * x)


def orders(x, v):
    s = jnp.sort(x, axis=1)
    vals, _ = jax.lax.top_k(x * v[2], 2)
    best = jnp.take_along_axis(x, jnp.argmax(x, axis=1)[:, None], axis=1)
    return jnp.sum(s * jnp.arange(4, dtype=jnp.float32)) + jnp.sum(vals * vals) + jnp.sum(best)


def elementwise_new(x, v):
    p = (x * x + 1.0) ** v[0]
    c = jnp.clip(x * 2.0, -0.5, 0.8)
    w = jnp.where((v > 0.0).reshape(3, 1), x, -x * 2.0)
    return jnp.sum(p) + jnp.sum(c * c) + jnp.sum(w * x) + jnp.sum(jax.nn.one_hot(ia([0, 3, 1]), 4) * x)


def scanned(x, v):
    w = v * 0.5

    def step(h, xs):
        h2 = jnp.tanh(h * w + xs)
        return h2, jnp.sum(h2 * h2)
    h, ys = jax.lax.scan(step, v, x)
    return jnp.sum(h) + jnp.sum(ys)


@smap(m, (P("i"), P()), P())
def moe_like(x, v):
    g, e = jax.lax.top_k(x, 2)
    routed = jax.lax.all_to_all(jnp.take(x, e.reshape(4), axis=1).reshape(4, 2), "i", 0, 0, tiled=True)
    return jax.lax.psum(jnp.sum(routed * routed) + jnp.sum(g * v[1]), "i")


def check(t):
    x = twin.normal((3, 4), 31)
    v = twin.normal((3,), 32)
    x8 = twin.normal((8, 4), 33)
    cases = {"take, x[idx], take_along_axis": (gathers, [x, v]),
             "scatter_add, x.at[].add": (scatters, [x, v]),
             "cumsum": (scans, [x, v]),
             "sort, top_k, argmax": (orders, [x, v]),
             "pow, clip, where, one_hot": (elementwise_new, [x, v]),
             "scan": (scanned, [x.T, v]),
             "top_k and all_to_all in a shmap": (moe_like, [x8, v])}
    for label, (f, args) in cases.items():
        metric, fd, fwd, rev = twin.check_grads_metric(f, args)
        t.equal(label, metric < 0.01, how="JAX jvp/vjp vs float64 fd: %.2g (fd %.6g, jvp %.6g, vjp %.6g)"
                % (metric, fd, fwd, rev))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
