"""tests/run/grad_checks_2d.smp: check_grads on a 2-D mesh (x=2, y=4). As grad_checks.py:
check_grads' metric recomputed with JAX's jvp/vjp along the same directions, fd in float64;
the verdict must be the printed one (the gradients are compared with JAX in
grad_checks_values.smp). Notes: `extrema` uses twin.pmax/pmin (JAX's have no gradient);
the conds of `cond_on_y` and `loop_with_cond` have device-varying predicates, but nothing in
their branches needs a collective among devices that disagree on the predicate (in
loop_with_cond the cotangent of s, invariant over "x", is psummed over "x", whose devices
share axis_index("y")), so JAX's transpose runs them."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap, f32, pvary
from grad_checks import check_verdicts

PROGRAM = "tests/run/grad_checks_2d.smp"
lax = jax.lax
xy = twin.mesh(("x", 2), ("y", 4))
RING_Y = [(0, 1), (1, 2), (2, 3), (3, 0)]
RING_XY = [(0, 7), (1, 0), (2, 1), (3, 2), (4, 3), (5, 4), (6, 5), (7, 6)]


@smap(xy, (P("x", "y"), P()), (P(), P("x", "y")))
def ring_loop(a, w):
    acc = a
    h = pvary(w, ("x", "y"))  # the carry becomes varying: shmapc lifts it before the loop
    for k in range(4):
        acc = jnp.tanh(acc * w) + lax.ppermute(acc, "y", perm=RING_Y) * 0.5
        moved = lax.ppermute(acc, ("x", "y"), perm=RING_XY)
        h = h * 0.9 + jnp.sum(moved * moved, axis=0) * 0.1
    return lax.psum(h, ("x", "y")), acc


@smap(xy, P("x", "y"), (P("x", None), P()))
def cond_on_y(a):
    iy = lax.axis_index("y")
    b = lax.cond(iy % 2 == 0, lambda: jnp.sin(a) * a,
                 lambda: lax.cond(iy == 3, lambda: jnp.exp(a * 0.5), lambda: a * a * a))
    c = lax.cond((iy < 2) & (lax.axis_index("x") == 1), lambda: jnp.tanh(b) * 2.0, lambda: b)
    return lax.psum(b, "y"), lax.pmean(c * a, ("x", "y"))


@smap(xy, (P("x", "y"), P("y")), P("x", "y"))
def loop_with_cond(a, s):
    acc = a
    for k in range(3):
        other = lax.ppermute(acc, "x", perm=[(0, 1), (1, 0)])
        acc = lax.cond((lax.axis_index("y") + k) % 2 == 0,
                       lambda: jnp.sin(acc) * s + other * 0.5,
                       lambda: acc * jnp.tanh(other + s))
    return acc


@smap(xy, P("x", "y"), (P("x", None), P(), P(None, "y")))
def extrema(a):
    hi = twin.pmax(jnp.exp(a * 0.5), "y")
    lo = twin.pmin(jnp.tanh(a), ("x", "y"))
    hx = twin.pmax(a * 3.0, "x") * twin.pmin(a, "x")
    return hi * 2.0, lo + twin.pmax(a, ("y", "x")), hx


@smap(xy, (P(("x", "y")), P(("x", "y"), None)),
      (P(("x", "y")), P(("y", "x")), P(("x", "y"), None), P(("y", "x")), P(("x", "y")), P()))
def tuple_collectives(v, m):
    s = lax.psum_scatter(v * v, ("x", "y"), tiled=True)
    s2 = lax.psum_scatter(jnp.sin(v), ("y", "x"), tiled=True)
    t = lax.all_to_all(m * v[:, None], ("x", "y"), 0, 1, tiled=True)
    u = lax.all_to_all(jnp.tanh(m), ("y", "x"), 0, 0)
    r = lax.psum_scatter(m * m, ("x", "y"))
    g = lax.all_gather(jnp.tanh(v), ("x", "y"), tiled=True)
    return s, s2, t, u, r, lax.pmean(jnp.sum(g * g) * jnp.sum(v), ("x", "y"))


@smap(xy, (P("x", None), P(None, "y"), P("y", None), P("x", None)), P())
def dp_tp_loss(xb, w1, w2, yb):
    h = jnp.tanh(xb @ w1)
    out = lax.psum(h @ w2, "y")
    d = out - yb
    return lax.pmean(jnp.mean(d * d), "x")


def cases():
    a = twin.normal((4, 8), 2) * 0.5
    spread = ((np.arange(32, dtype=np.int32) * 13 % 32).astype(np.float32).reshape(4, 8) * f32(0.1)
              - f32(1.5))
    return {
        "ring loop (ppermute over y and over (x, y))":
            (ring_loop, [twin.normal((4, 12), 1), f32([0.5, -0.8, 1.1])]),
        "cond on axis_index(y)": (cond_on_y, [a]),
        "loop with cond on axis_index(y)":
            (loop_with_cond, [a, f32([0.3, -0.6, 0.9, 1.2, -0.4, 0.7, -1.0, 0.2])]),
        "pmax/pmin over y, x and (x, y)": (extrema, [spread]),
        "psum_scatter/all_to_all over (x, y)":
            (tuple_collectives, [twin.normal((64,), 3), twin.normal((64, 2), 4)]),
        "dp over x, tensor parallel over y":
            (dp_tp_loss, [twin.normal((4, 4), 5), twin.normal((4, 8), 6) * 0.5,
                          twin.normal((8, 3), 7) * 0.5, twin.normal((4, 3), 8)]),
    }


def check(t):
    check_verdicts(t, cases())


if __name__ == "__main__":
    twin.main(PROGRAM, check)
