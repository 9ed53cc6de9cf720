"""The communication of shmapc's partitioned jit functions against XLA's: each jit
function of samples/jit_layers.smp and tests/run/jit_{shardy_examples,control,indexing,open_dims,slices,fwd_bwd,
grad_reduce,move_small,move_small_edges}.smp is
compiled by jax.jit with the same shardings (as JAX can write them: see
tests/jax/twins/jit_shardy_examples.py), and the
collectives of XLA's compiled (SPMD-partitioned) HLO are compared with those shmapc reports
for its shmap (`--emit=comm`), by the bytes each device puts into collectives (its input to
each: an all-gather's block, an all-reduce's array). shmapc must never put in more than XLA;
the report says where it puts in fewer.

    PY=$(tests/jax/venv.sh); XLA_FLAGS=--xla_force_host_platform_device_count=8 \\
        $PY tests/jax/jit_vs_xla.py --shmapc build/compiler/shmapc"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAM = os.path.join(ROOT, "samples", "jit_layers.smp")
SHARDY_EXAMPLES = os.path.join(ROOT, "tests", "run", "jit_shardy_examples.smp")
CONTROL = os.path.join(ROOT, "tests", "run", "jit_control.smp")
INDEXING = os.path.join(ROOT, "tests", "run", "jit_indexing.smp")
OPEN_DIMS = os.path.join(ROOT, "tests", "run", "jit_open_dims.smp")
SLICES = os.path.join(ROOT, "tests", "run", "jit_slices.smp")
FWD_BWD = os.path.join(ROOT, "tests", "run", "jit_fwd_bwd.smp")
PADS = os.path.join(ROOT, "tests", "run", "jit_pads.smp")
GRAD_REDUCE = os.path.join(ROOT, "tests", "run", "jit_grad_reduce.smp")
MOVE_SMALL = os.path.join(ROOT, "tests", "run", "jit_move_small.smp")
MOVE_SMALL_EDGES = os.path.join(ROOT, "tests", "run", "jit_move_small_edges.smp")


def mesh(**axes):
    n = int(np.prod(list(axes.values())))
    return Mesh(np.array(jax.devices()[:n]).reshape(tuple(axes.values())), tuple(axes))


MESH = mesh(X=2, Y=2)
BYTES = {"f32": 4, "f64": 8, "s32": 4, "i32": 4, "pred": 1, "bool": 1, "f16": 2, "bf16": 2, "s64": 8, "i64": 8}


def S(*spec):
    return NamedSharding(MESH, P(*spec))


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def mlp_loss(x, w1, w2):
    y = jnp.tanh(x @ w1) @ w2
    return jnp.mean(y * y)


def moe(w, a, b):
    mask = jax.nn.one_hot(b, 4).T
    out = (mask[:, :, None] * a[None]) @ w
    return jnp.sum(mask[:, :, None] * out, axis=0)


# name in jit_layers.smp -> (function, in_shardings, out_shardings or None, argument shapes)
def constrained(w_out, w_in, x):
    hidden = jnp.einsum("fd,bd->bf", w_in, x)
    hidden = jax.lax.with_sharding_constraint(hidden, S("X", "Y"))
    return jnp.einsum("df,bf->bd", w_out, hidden)


CASES = {
    "layer": (lambda x, w: x @ w, (S("X", "Y"), S("Y", None)), S("X", None), (f32(8, 16), f32(16, 32))),
    "mlp_loss": (mlp_loss, (S("X", None), S(None, "Y"), S("Y", None)), S(), (f32(8, 16), f32(16, 32), f32(32, 4))),
    # (no out_shardings in jit_layers.smp: propagation gives the sum a's P("X", None), given
    # to XLA too, which would otherwise choose a replicated result)
    "add_moved": (lambda a, b: a + b, (S("X", None), S("Y", None)), S("X", None), (f32(8, 4), f32(8, 4))),
    # (the result: P("X", None), as propagation gives it)
    "constrained": (constrained, (S(), S(), S("X", None)), S("X", None), (f32(16, 32), f32(32, 16), f32(8, 16))),
    "relayout": (lambda a: a * 2.0, (S("X", None),), S(None, "X"), (f32(8, 4),)),
    # How To Scale Your Model's Problem 3.2: a reduce-scatter
    "down": (lambda t, w: t @ w, (S("X", "Y"), S("Y", None)), S("X", "Y"), (f32(8, 32), f32(32, 16))),
    # How To Scale Your Model's collective matmul baseline, Problem 3.3's block, Problem 2.2's MoE
    "collective_baseline": (lambda lhs, rhs: lhs @ rhs, (S("X", "Y"), S(None, "Y")), S("X", "Y"),
                            (f32(8, 16), f32(16, 32))),
    "block": (lambda inp, w_in, w_out: jnp.tanh(inp @ w_in) @ w_out, (S("X", "Y"), S(None, "Y"), S("Y", None)),
              S("X", "Y"), (f32(8, 16), f32(16, 32), f32(32, 16))),
    # (the result: P("X", None), as propagation gives it)
    "moe": (moe, (S("X", None, "Y"), S("X", "Y"), S("X")), S("X", None),
            (f32(4, 8, 16), f32(8, 8), jax.ShapeDtypeStruct((8,), jnp.int32))),
    # How To Scale Your Model's Problem 1: per-shard means, no communication
    "shard_means": (lambda a: jnp.mean(a.reshape(2, 4, 4), axis=1), (S("X", "Y"),), S("X", "Y"), (f32(8, 4),)),
}


def N(m, *spec):
    return NamedSharding(m, P(*spec))


xyz, x_split, xy_split, m22, xz = mesh(x=2, y=2, z=2), mesh(x1=2, x2=2), mesh(x=2, y1=2, y2=2), mesh(x=2, y=2), mesh(x=2, z=3)


def padded(a):
    a = jax.lax.with_sharding_constraint(a, N(xz, "x", None, "z"))
    s, mx = jnp.sum(a * a, axis=0), jnp.max(jnp.cos(a), axis=2)
    # (the results' shardings as shmapc's: {}, {"z"} and {"x"}, {}, both uneven)
    return jax.lax.with_sharding_constraint(s, N(xz, None, "z")), jax.lax.with_sharding_constraint(mx, N(xz, "x"))


def padded_matmul(a, w):
    a = jax.lax.with_sharding_constraint(a, N(xz, "x", "z"))
    w = jax.lax.with_sharding_constraint(w, N(xz, "z", None))
    return jax.lax.with_sharding_constraint(jnp.log(a) @ w, N(xz, "x"))  # (shmapc's result: {"x"}, {})


# Shardy's examples (tests/run/jit_shardy_examples.smp), with the shardings shmapc's propagation ends
# with (JAX has no open dimensions, priorities or explicit replication to write); sub-axes as
# axes of a finer mesh; uneven shardings (which jax.jit refuses on parameters) put on
# replicated operands by with_sharding_constraint, which costs XLA no communication.
SHARDY_EXAMPLES_CASES = {
    "basic": (lambda a, b, c: (a + b) * c, (N(xyz, "x", ("z", "y")), N(xyz, "x", ("z", "y")), N(xyz, "x", None)),
              None, (f32(4, 8), f32(4, 8), f32(4, 8))),
    "closed": (lambda a, b: jnp.sin(a + b), (N(xyz, "x", ("z", "y")), N(xyz, "x", "z")), N(xyz, "x", ("z", "y")),
               (f32(4, 8), f32(4, 8))),
    "conflict": (lambda a, b: a * b, (N(xyz, "x", ("z", "y")), N(xyz, "x", "z")), N(xyz, "x"),
                 (f32(4, 8), f32(4, 8))),
    # ({"x"} and the result's {"x":(1)2} on x=4 as axes of the mesh x1=2, x2=2)
    "rows": (lambda v: jnp.sum(jnp.sin(v.reshape(2, 4)), axis=1), (N(x_split, ("x1", "x2")),), N(x_split, "x1"),
             (f32(8),)),
    "sub_axis": (lambda a, w: jnp.tanh(a) @ w, (N(xy_split, "x", "y2"), N(xy_split)), N(xy_split, "x"),
                 (f32(4, 8), f32(8, 3))),
    "columns_first": (lambda x, w: jnp.exp(x @ w), (N(m22, "y", None), N(m22, None, "y")), N(m22, None, "y"),
                      (f32(8, 4), f32(4, 6))),
    "rows_first": (lambda x, w: jnp.exp(x @ w), (N(m22, "y", None), N(m22, None, "y")), N(m22, "y", None),
                   (f32(8, 4), f32(4, 6))),
    "padded": (padded, (N(xz),), None, (f32(7, 3, 8),)),
    "padded_matmul": (padded_matmul, (N(xz), N(xz)), None, (f32(7, 8), f32(8, 5))),
}


# Loops and conditionals (tests/run/jit_control.smp): each collective counted once, as both
# listings show a loop's body once.
CONTROL_CASES = {
    "layers": (lambda x, w: jax.lax.fori_loop(0, 3, lambda k, h: jnp.tanh(h @ w), x), (S("X", "Y"), S("Y", None)),
               None, (f32(8, 16), f32(16, 16))),
    "halve_until_small": (lambda a: jax.lax.while_loop(lambda b: jnp.sum(b * b) > 1.0, lambda b: b * 0.5, a),
                          (S("X", "Y"),), None, (f32(8, 4),)),
    "choose": (lambda a, s: jax.lax.cond(s > 0.0, lambda: a * s, lambda: jnp.sin(a)), (S("X"), S()), None,
               (f32(8, 4), f32())),
}


def along_rows(a):
    return (a[:, 1:4], jnp.argmax(a, axis=1).astype(jnp.int32), jnp.cumsum(a, axis=1),
            jnp.argsort(a, axis=1, stable=True).astype(jnp.int32), jnp.concatenate([a, a * 2.0], axis=1),
            jax.lax.dynamic_slice(a, (1, 0), (7, 6)))


def i32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


# Indexing, slicing and joining (tests/run/jit_indexing.smp); results in the shardings shmapc's
# propagation gives them.
INDEXING_CASES = {
    "embed": (lambda table, tokens: table[tokens], (S("X", "Y"), S("X")), S("X", None, "Y"), (f32(6, 8), i32(4, 3))),
    "along_rows": (along_rows, (S("X", "Y"),), (S("X"), S("X"), S("X"), S("X"), S("X"), S(None, "Y")), (f32(8, 6),)),
    "scattered": (lambda x, idx, v: x.at[:, idx].add(jax.lax.with_sharding_constraint(v, S("X", "Y"))),
                  (S("X", "Y"), S(), S("X")), S("X", None), (f32(8, 6), i32(5), f32(8, 5))),
    "counted": (lambda a: a + jax.lax.broadcasted_iota(jnp.int32, (8, 6), 1).astype(jnp.float32)
                + jax.lax.dynamic_update_slice(a, jnp.ones((8, 2), jnp.float32), (0, 2)), (S("X"),), S("X"),
                (f32(8, 6),)),
}


# An open dimension never takes an axis another dimension of its value uses
# (tests/run/jit_open_dims.smp), with the shardings propagation ends with: the operands' written
# axes, the result's from the p0 operand.
OPEN_DIMS_CASES = {
    "rows_later": (lambda a, b: a + b, (N(m22, "x", None), N(m22, None, "x")), N(m22, None, "x"),
                   (f32(4, 4), f32(4, 4))),
    "other_operand": (lambda a, b: a * b, (N(m22, None, "x"), N(m22, "x", None)), N(m22, None, "x"),
                      (f32(4, 4), f32(4, 4))),
    # (the parameter returned keeps its written rows over "x", the result its columns)
    "returned": (lambda a: a, (N(m22, "x", None),), N(m22, None, "x"), (f32(4, 4),)),
    "three_axes": (lambda a, b: a - b * 0.5, (N(xyz, ("x", "y"), None), N(xyz, None, ("y", "z"))),
                   N(xyz, None, ("y", "z")), (f32(8, 8), f32(8, 8))),
}


# Their gradients too: shmapc's backward shmap of each (`NAME_partitioned_vjp`, which the
# program's grad makes) against XLA's vjp of the function under jax.jit, the cotangent in the
# result's sharding and the gradients in the operands'.
def vjp_case(case):
    fn, ins, out, args = case
    n, results = len(args), jax.eval_shape(fn, *args)
    if isinstance(results, tuple):  # (a cotangent for each result, in its sharding)
        cts = tuple(jax.ShapeDtypeStruct(r.shape, jnp.float32) for r in results)
        return (lambda *a: jax.vjp(fn, *a[:n])[1](tuple(a[n:])), tuple(ins) + tuple(out), tuple(ins),
                tuple(args) + cts)
    return (lambda *a: jax.vjp(fn, *a[:-1])[1](a[-1]), tuple(ins) + (out,), tuple(ins),
            tuple(args) + (jax.ShapeDtypeStruct(results.shape, jnp.float32),))


OPEN_DIMS_VJP_CASES = {name + "_vjp": vjp_case(OPEN_DIMS_CASES[name])
                       for name in ("rows_later", "other_operand", "three_axes")}


# Slices of sharded dimensions on the local blocks (tests/run/jit_slices.smp), forward and
# vjp; window's uneven u and tail put in their shardings by with_sharding_constraint.
SLICES_CASES = {
    "interior": (lambda a: a[1:7], (N(m22, "x"),), N(m22, "x"), (f32(8),)),
    "right_halo": (lambda a: a[5:11], (N(m22, "x"),), N(m22, "x"), (f32(12),)),
    "left_halo": (lambda a: a[0:12], (N(m22, ("x", "y")),), N(m22, ("x", "y")), (f32(16),)),
    "column": (lambda c: c[:, 0], (N(m22, "x", "y"),), N(m22, "x"), (f32(8, 4),)),
    "window": (lambda c, u: (jax.lax.with_sharding_constraint(c[1:7, 2:6], N(m22, "x", "y")),
                             jax.lax.with_sharding_constraint(jax.lax.with_sharding_constraint(u, N(m22, "x"))[1:6],
                                                              N(m22, "x"))),
               (N(m22, "x", "y"), N(m22)), None, (f32(8, 8), f32(7))),
    "strided": (lambda a, b: (a[0:8:2], b[5:16:2]), (N(m22, "x"), N(m22, ("x", "y"))), (N(m22), N(m22)),
                (f32(8), f32(16))),
}
SLICES_VJP_CASES = {name + "_vjp": vjp_case(SLICES_CASES[name])
                    for name in ("interior", "right_halo", "left_halo", "column", "strided")}


# The backward pass weighed (tests/run/jit_fwd_bwd.smp), on x=2, y=4: the differentiated
# function keeps XLA's split contraction (forward and vjp as XLA), the one never
# differentiated gathers (fewer bytes forward).
x2y4 = mesh(x=2, y=4)
FWD_BWD_CASES = {
    name: (lambda a, w: jnp.exp(a * 0.1) @ w, (N(x2y4, "x", "y"), N(x2y4)), N(x2y4, "x"), (f32(8, 8), f32(8, 4)))
    for name in ("dense", "dense_inference")
}
FWD_BWD_VJP_CASES = {"dense_vjp": vjp_case(FWD_BWD_CASES["dense"])}


def tanh_dense(d, w):
    return jnp.tanh(d @ w)


# Backward shmaps that sum a replicated weight's gradient and keep a block of it
# (tests/run/jit_grad_reduce.smp): the vjp of each function, as OPEN_DIMS_VJP_CASES (the
# embedding's with respect to the table alone, the tokens being integers).
GRAD_REDUCE_CASES = {
    "f": (lambda a, w: jnp.exp(a * 0.1) @ w, (N(m22, "x", "y"), N(m22, "y", None)), N(m22, "x", None),
          (f32(8, 2), f32(2, 8))),
    "layer": (tanh_dense, (N(m22, "x", None), N(m22, "x", None)), N(m22, "x", None), (f32(8, 4), f32(4, 4))),
    "sub": (tanh_dense, (N(m22, ("x", "y"), None), N(m22, "x", None)), N(m22, ("x", "y"), None), (f32(8, 4), f32(4, 4))),
    "partial": (tanh_dense, (N(m22, "x", None), N(m22, ("x", "y"), None)), N(m22, "x", None), (f32(8, 4), f32(4, 4))),
}
GRAD_REDUCE_VJP_CASES = {name + "_vjp": vjp_case(case) for name, case in GRAD_REDUCE_CASES.items()}
# (the forward of those the program also calls outside grad)
GRAD_REDUCE_FWD_CASES = {name: GRAD_REDUCE_CASES[name] for name in ("f", "layer")}
GRAD_REDUCE_FWD_CASES["embed_loss"] = (lambda table, tokens: jnp.sum(jnp.tanh(table[tokens])), (N(m22, "x"), N(m22, "y")),
                                       N(m22), (f32(6, 8), jax.ShapeDtypeStruct((4, 3), jnp.int32)))
GRAD_REDUCE_VJP_CASES["embed_loss_vjp"] = (
    lambda table, tokens, ct: jax.vjp(lambda t: jnp.sum(jnp.tanh(t[tokens])), table)[1](ct)[0],
    (N(m22, "x"), N(m22, "y"), N(m22)), N(m22, "x"), (f32(6, 8), jax.ShapeDtypeStruct((4, 3), jnp.int32), f32()))


# Values moved at their smallest shape, and once (tests/run/jit_move_small.smp): a broadcast's or
# widening convert's operand moved rather than its result, a value used in two shardings moved
# to the second from the first's block, a splat made again rather than moved, a loop's constant
# moved once before the loop (each listing shows the loop body once).
def two_uses(a):
    s = jnp.sin(a)
    return s * 2.0, s + 1.0


MOVE_SMALL_CASES = {
    "scaled": (lambda x, v: x * v, (N(m22, "x"), N(m22, "y")), N(m22, "x"), (f32(4, 8), f32(8))),
    "widened": (lambda x, v: x * v.astype(jnp.float32), (N(m22, "x"), N(m22, "y")), N(m22, "x"),
                (f32(4, 8), jax.ShapeDtypeStruct((4, 8), jnp.float16))),
    "whole_then_split": (two_uses, (N(m22, "x"),), (N(m22), N(m22, None, "y")), (f32(4, 8),)),
    "split_then_whole": (two_uses, (N(m22, "x"),), (N(m22, None, "y"), N(m22)), (f32(4, 8),)),
    "splat_twice": (lambda a, b: (a * jnp.full((4, 8), 1.5, jnp.float32), b * jnp.full((4, 8), 1.5, jnp.float32)),
                    (N(m22, "x"), N(m22)), (N(m22, "x"), N(m22)), (f32(4, 8), f32(4, 8))),
    "looped": (lambda h0, b: jax.lax.fori_loop(0, 3, lambda k, h: jnp.tanh(h + b), h0),
               (N(m22, "x"), N(m22, "y")), N(m22, "x"), (f32(4, 8), f32(4, 8))),
}
MOVE_SMALL_VJP_CASES = {name + "_vjp": vjp_case(case) for name, case in MOVE_SMALL_CASES.items()}
MOVE_SMALL_EDGES_CASES = {
    "expanded": (lambda x, v, w: x * v.astype(jnp.float32) + w, (N(m22, "x"), N(m22, "y"), N(m22, None, "y")),
                 N(m22, "x"), (f32(4, 8), jax.ShapeDtypeStruct((8,), jnp.float16), f32(1, 8))),
}
# (no vjp of a while loop)
MOVE_SMALL_CASES["shrunk"] = (
    lambda h0, b: jax.lax.while_loop(lambda h: jnp.sum(h * b) > 1.0, lambda h: (h - b) * 0.5, h0),
    (N(m22, "x"), N(m22, "y")), N(m22, "x"), (f32(4, 8), f32(4, 8)))


# Padding and joining along a sharded dimension (tests/run/jit_pads.smp), forward and vjp;
# framed's uneven u and its padded result put in their shardings by with_sharding_constraint.
PADS_CASES = {
    "padded": (lambda a: jnp.pad(a, (1, 1)), (N(m22, "x"),), N(m22, "x"), (f32(8),)),
    "shifted": (lambda a: jnp.concatenate([jnp.zeros(2, jnp.float32), a[0:6]]), (N(m22, "x"),), N(m22, "x"), (f32(8),)),
    "joined": (lambda a, b: jnp.concatenate([a, b * 2.0]), (N(m22, "x"), N(m22)), N(m22, "x"), (f32(8), f32(8))),
    "framed": (lambda c, u: (jax.lax.with_sharding_constraint(jnp.pad(c, ((1, 1), (0, 0)), constant_values=1.0),
                                                              N(m22, "x", "y")),
                             jax.lax.with_sharding_constraint(
                                 jnp.pad(jax.lax.with_sharding_constraint(u, N(m22, "x")), (1, 1)), N(m22, "x"))),
               (N(m22, "x", "y"), N(m22)), None, (f32(6, 4), f32(7))),
}
PADS_VJP_CASES = {name + "_vjp": vjp_case(PADS_CASES[name]) for name in ("padded", "shifted", "joined")}


def nbytes(dtype, dims):
    return BYTES[dtype] * int(np.prod([int(d) for d in dims.split(",") if d] or [1]))


def group_size(line):
    """The devices in each replica group of an HLO collective: replica_groups={{0,1},{2,3}},
    or the mesh form replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_0'} (the listed axes)."""
    groups = re.search(r"replica_groups=\{\{([\d,]*)\}", line)
    if groups:
        return len(groups.group(1).split(","))
    mesh = re.search(r"replica_groups=mesh\[([^\]]*)\][^{]*\{([^}]*)\}", line)
    if mesh:
        sizes = dict((k, int(v)) for k, v in re.findall(r"'(\w+)'=(\d+)", mesh.group(1)))
        return int(np.prod([sizes[a] for a in re.findall(r"'(\w+)'", mesh.group(2))] or [1]))
    return 1


def xla_collectives(fn, ins, out, args):
    """(op, bytes a device puts in) of each collective in XLA's compiled HLO."""
    jitted = jax.jit(fn, in_shardings=ins, out_shardings=out) if out is not None else jax.jit(fn, in_shardings=ins)
    text = jitted.lower(*args).compile().as_text()
    found = []
    for line in text.splitlines():
        # (a result type, or a tuple of them: an all-to-all of several operands)
        m = re.search(r"= (\([^)]*\)|\w+\[[\d,]*\]\S*) (all-reduce|all-gather|reduce-scatter|all-to-all|"
                      r"collective-permute)(-start)?\(", line)
        if not m:
            continue
        op = m.group(2)
        n = group_size(line)
        b = sum(nbytes(t, d) for t, d in re.findall(r"(\w+)\[([\d,]*)\]", m.group(1)))
        found.append((op, b // n if op == "all-gather" else b * n if op == "reduce-scatter" else b))
    return found


def shmapc_collectives(shmapc, program):
    """shmap name -> (op, bytes a device puts in) of each collective --emit=comm lists."""
    text = subprocess.run([shmapc, "compile", program, "--emit=comm"], check=True, capture_output=True,
                          text=True).stdout
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"shmap @(\w+) ", line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        m = re.match(r"\s+(\w+)\[.*?\] (\w+)\[([\d,]*)\]", line)
        if m and cur is not None:
            cur.append((m.group(1), nbytes(m.group(2), m.group(3))))
        m = re.match(r"\s+per device and call: sent (\d+)(\.\.\d+)? B, received (\d+)(\.\.\d+)? B", line)
        if (m and cur and not any(int(g.strip(".")) for g in m.groups() if g)) or (
                cur and line.strip().startswith("no communication")):
            cur.pop()  # moves nothing (pscatter: each device keeps its block)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    failed = total = 0
    for program, cases in ((PROGRAM, CASES), (SHARDY_EXAMPLES, SHARDY_EXAMPLES_CASES),
                           (CONTROL, CONTROL_CASES),
                           (INDEXING, INDEXING_CASES), (OPEN_DIMS, {**OPEN_DIMS_CASES, **OPEN_DIMS_VJP_CASES}),
                           (SLICES, {**SLICES_CASES, **SLICES_VJP_CASES}),
                           (FWD_BWD, {**FWD_BWD_CASES, **FWD_BWD_VJP_CASES}),
                           (PADS, {**PADS_CASES, **PADS_VJP_CASES}),
                           (GRAD_REDUCE, {**GRAD_REDUCE_FWD_CASES, **GRAD_REDUCE_VJP_CASES}),
                           (MOVE_SMALL, {**MOVE_SMALL_CASES, **MOVE_SMALL_VJP_CASES}),
                           (MOVE_SMALL_EDGES, MOVE_SMALL_EDGES_CASES)):
        print("== " + os.path.relpath(program, ROOT))
        ours = shmapc_collectives(a.shmapc, program)
        for name, (fn, ins, out, args) in cases.items():
            xla = xla_collectives(fn, ins, out, args)
            # (a gradient's case NAME_vjp is the shmap NAME_partitioned_vjp)
            mine = ours.get(name[:-4] + "_partitioned_vjp" if name.endswith("_vjp") else name + "_partitioned", [])
            xb, mb = sum(b for _, b in xla), sum(b for _, b in mine)
            verdict = "FAIL" if mb > xb else "ok  "
            failed += mb > xb
            total += 1
            print("%s %-19s shmapc %5d B a device in %s; XLA %5d B in %s%s" % (
                verdict, name, mb, [op for op, _ in mine], xb, [op for op, _ in xla],
                " (fewer)" if mb < xb else ""))
    print("%d of %d jit functions put more into collectives than XLA" % (failed, total))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
