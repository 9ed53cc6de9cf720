"""tests/run/jit_shardy_examples.smp: Shardy's sharding examples under jax.jit with the same
shardings, values and gradients. JAX's NamedSharding has no sub-axes, priorities, open dimensions or explicit
replication, so each function gets the shardings shmapc's propagation ends with, written the
way JAX can: "y":(2)2 of y=4 as the minor axis of a mesh that splits y in two (devices keep
their numbers); the reshape's sub-axes are left to XLA (no out_shardings). JAX refuses uneven
shardings of jit parameters, so the padded functions take their operands replicated and put
the uneven sharding on them with with_sharding_constraint (XLA pads as shmapc does)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, iota
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_shardy_examples.smp"


def S(mesh, *spec):
    return NamedSharding(mesh, P(*spec))


xyz = twin.mesh(("x", 2), ("y", 2), ("z", 2))
mesh_x = twin.mesh(("x", 4))
xy_split = twin.mesh(("x", 2), ("y1", 2), ("y2", 2))  # y=4 as "y":(1)2, "y":(2)2
m = twin.mesh(("x", 2), ("y", 2))
xz = twin.mesh(("x", 2), ("z", 3))

basic = jax.jit(lambda a, b, c: (a + b) * c,
                in_shardings=(S(xyz, "x", ("z", "y")), S(xyz, "x", ("z", "y")), S(xyz, "x", None)))
closed = jax.jit(lambda a, b: jnp.sin(a + b), in_shardings=(S(xyz, "x", ("z", "y")), S(xyz, "x", "z")))
conflict = jax.jit(lambda a, b: a * b, in_shardings=(S(xyz, "x", ("z", "y")), S(xyz, "x", "z")),
                   out_shardings=S(xyz, "x"))
rows = jax.jit(lambda v: jnp.sum(jnp.sin(v.reshape(2, 4)), axis=1), in_shardings=S(mesh_x, "x"))
sub_axis = jax.jit(lambda a, w: jnp.tanh(a) @ w, in_shardings=(S(xy_split, "x", "y2"), S(xy_split)),
                   out_shardings=S(xy_split, "x"))
columns_first = jax.jit(lambda x, w: jnp.exp(x @ w), in_shardings=(S(m, "y", None), S(m, None, "y")),
                        out_shardings=S(m, None, "y"))
rows_first = jax.jit(lambda x, w: jnp.exp(x @ w), in_shardings=(S(m, "y", None), S(m, None, "y")),
                     out_shardings=S(m, "y", None))


def padded_fn(a):
    a = jax.lax.with_sharding_constraint(a, S(xz, "x", None, "z"))
    return jnp.sum(a * a, axis=0), jnp.max(jnp.cos(a), axis=2)


def padded_matmul_fn(a, w):
    a = jax.lax.with_sharding_constraint(a, S(xz, "x", "z"))
    w = jax.lax.with_sharding_constraint(w, S(xz, "z", None))
    return jnp.log(a) @ w


padded = jax.jit(padded_fn)
padded_matmul = jax.jit(padded_matmul_fn)


def loss_unsharded(v, a, w, p):
    s, mx = unsharded_padded(p)
    r = jnp.sum(jnp.sin(v.reshape(2, 4)), axis=1)
    return jnp.sum(r * r) + jnp.sum(jnp.tanh(a) @ w) + jnp.sum(s) * 0.01 + jnp.sum(mx)


def unsharded_padded(a):
    return jnp.sum(a * a, axis=0), jnp.max(jnp.cos(a), axis=2)


def check(t):
    a = jnp.sin(iota(32).reshape(4, 8))
    b = jnp.cos(iota(32).reshape(4, 8))
    t.close("basic", basic(a, b, a * b))
    t.close("closed", closed(a, b))
    t.close("conflict", conflict(a, b))
    v = iota(8) * 0.3
    t.close("rows", rows(v))
    w = iota(24).reshape(8, 3) * 0.1 - 1.0
    t.close("sub_axis", sub_axis(a, w))
    x = iota(32).reshape(8, 4) * 0.05
    w6 = jnp.cos(iota(24).reshape(4, 6))
    t.close("columns_first", columns_first(x, w6))
    t.close("rows_first", rows_first(x, w6))
    p = jnp.sin(iota(168).reshape(7, 3, 8))
    s, mx = padded(p)
    t.close("padded sum", s)
    t.close("padded max", mx)
    pa = iota(56).reshape(7, 8) * 0.1 + 0.5
    t.close("padded_matmul", padded_matmul(pa, iota(40).reshape(8, 5) * 0.1))
    # (the loss's terms live on different meshes, which one JAX computation cannot mix: each
    # term's gradient comes from its own jit function; the sum's from check_grads_metric)
    gv = jax.grad(lambda v: jnp.sum(rows(v) * rows(v)))(v)
    ga, gw = jax.grad(lambda a, w: jnp.sum(sub_axis(a, w)), argnums=(0, 1))(a, w)
    gp = jax.grad(lambda p: jnp.sum(padded(p)[0]) * 0.01 + jnp.sum(padded(p)[1]))(p)
    t.close("grad v", gv)
    t.close("grad a", ga)
    t.close("grad w", gw)
    t.close("grad p row 6", gp[6])
    metric, _, _, _ = twin.check_grads_metric(loss_unsharded, [v, a, w, p])
    t.equal("check_grads", metric < 0.01, how="JAX jvp/vjp vs float64 fd: %.2g" % metric)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
