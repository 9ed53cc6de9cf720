#!/usr/bin/env python3
"""Writes tests/run/<P>_values.smp for the check_grads programs P = grad_checks,
grad_checks_2d, grad_checks_samples: each imports P (`# FLAGS: -I tests/run`) and, for every
function P passes to check_grads, prints jvp's output tangents along check_grads' directions
(random_normal of argument i's type, seed i) and vjp's input cotangents for check_grads'
cotangents (random_normal of result k's type, seed 500 + k). check_grads only prints a
verdict; these print the derivatives themselves, so the JAX twin of each values program
(tests/jax/twins/<P>_values.py) compares them with jax.jvp / jax.vjp element by element.

Run in the JAX venv (it reads the shapes off the twins):
    $(tests/jax/venv.sh) tests/jax/make_values_programs.py
then regenerate the expected outputs with tests/golden.py --update and check them with the twins.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "twins"))
import twin  # noqa: E402
from twin import jax  # noqa: E402

# The arguments each program passes to check_grads, as .smp expressions (its main()).
X = "random_normal(f32[4, 2], seed=1) * 0.5"
Y = "random_normal(f32[4, 2], seed=2) * 0.5"
A2 = "random_normal(f32[4, 8], seed=2) * 0.5"
X8 = "[3.0, -1.0, 0.5, 2.0, -2.5, 1.2, 1.5, 0.25]"
A44 = "random_normal(f32[4, 4], seed=11)"
CMA = "reshape(iota(f32[128]), [8, 16]) / 64.0 - 1.0"
CMW = "reshape(iota(f32[128]), [16, 8]) / 32.0 - 2.0"
SA = "reshape(iota(f32[32]), [4, 8]) / 32.0"
SW = "reshape(iota(f32[32]), [8, 4]) / 16.0 - 1.0"
MX = "random_uniform(f32[16, 2], seed=1) * 2.0 - 1.0"
TX = "reshape(iota(f32[8]), [2, 4]) / 8.0 - 0.3"
TW1 = "reshape(sin(iota(f32[32])), [4, 8])"
TW2 = "reshape(cos(iota(f32[32])), [8, 4])"
PROGRAMS = {
    "grad_checks": {
        "elementwise": ("elementwise", [X, Y]),
        "reductions": ("reductions", [X + " * 3.0 + 1.0"]),
        "shapes": ("shapes", [X]),
        "matmuls": ("matmuls", [X, "transpose(%s)" % Y]),
        "slicing": ("slicing", [X]),
        "control": ("control", [X]),
        "data parallel": ("data_parallel", ["[0.5, -0.2, 0.1]", "random_normal(f32[8, 3], seed=3)"]),
        "collectives": ("collectives", ["iota(f32[16]) * 0.1 + 0.05"]),
        "2-D mesh": ("mesh_2d", [X, "[0.3, -0.7]"]),
        "device-varying cond": ("varying_cond", ["iota(f32[8]) * 0.2 + 0.1"]),
        "loop in shmap": ("loop_in_shmap", ["iota(f32[8]) * 0.1", "[0.2, -0.4]"]),
    },
    "grad_checks_2d": {
        "ring loop (ppermute over y and over (x, y))":
            ("ring_loop", ["random_normal(f32[4, 12], seed=1)", "[0.5, -0.8, 1.1]"]),
        "cond on axis_index(y)": ("cond_on_y", [A2]),
        "loop with cond on axis_index(y)":
            ("loop_with_cond", [A2, "[0.3, -0.6, 0.9, 1.2, -0.4, 0.7, -1.0, 0.2]"]),
        "pmax/pmin over y, x and (x, y)":
            ("extrema", ["reshape(cast(iota(i32[32]) * 13 % 32, f32), [4, 8]) * 0.1 - 1.5"]),
        "psum_scatter/all_to_all over (x, y)":
            ("tuple_collectives", ["random_normal(f32[64], seed=3)", "random_normal(f32[64, 2], seed=4)"]),
        "dp over x, tensor parallel over y":
            ("dp_tp_loss", ["random_normal(f32[4, 4], seed=5)", "random_normal(f32[4, 8], seed=6) * 0.5",
                            "random_normal(f32[8, 3], seed=7) * 0.5", "random_normal(f32[4, 3], seed=8)"]),
    },
    "grad_checks_samples": {
        "psum: psum, pmean, pmax, pmin": ("reductions", [X8]),
        "psum_2d: sum_over_y": ("sum_over_y", [A44]),
        "psum_2d: sum_over_x": ("sum_over_x", [A44]),
        "psum_2d: sum_over_both": ("sum_over_both", [A44]),
        "all_gather: gather": ("gather", [X8]),
        "psum_scatter: scatter_tiled": ("scatter_tiled", ["iota(f32[8]) * 0.25 - 1.0"]),
        "psum_scatter: scatter_untiled": ("scatter_untiled", [A44]),
        "all_to_all: transpose_blocks": ("transpose_blocks", [A44]),
        "ppermute: shifts": ("shifts", [X8]),
        "axis_index: indices as weights": ("axis_index_weights", ["random_normal(f32[16], seed=12)"]),
        "slice_and_average": ("slice_and_average", ["random_normal(f32[512], seed=13)"]),
        "collective_matmul: all_gather version": ("matmul_allgather", [CMA, CMW]),
        "collective_matmul: ppermute-in-a-loop version": ("matmul_collective", [CMA, CMW]),
        "collective_matmul_grad: all_gather version": ("matmul_allgather_small", [SA, SW]),
        "collective_matmul_grad: ppermute-in-a-loop version": ("matmul_collective_small", [SA, SW]),
        "collective_matmul_grad: loss_allgather": ("loss_allgather", [SA, SW]),
        "collective_matmul_grad: loss_collective": ("loss_collective", [SA, SW]),
        "dp_loss: loss": ("dp_loss", ["random_normal(f32[3, 2], seed=1) * 0.5", "[0.1, -0.2]",
                                      "random_uniform(f32[8, 3], seed=2)", "random_normal(f32[8, 2], seed=3)"]),
        "dp_mlp_train: loss": ("mlp_loss", ["random_normal(f32[2, 8], seed=2)", "random_normal(f32[8], seed=4) * 0.1",
                                            "random_normal(f32[8, 1], seed=3) * 0.5", "mx",
                                            "reshape(sin(2.0 * mx[:, 0]) + 0.5 * mx[:, 1], [16, 1])"]),
        "megatron_mlp: mlp": ("megatron_mlp", [TX, TW1, TW2]),
        "megatron_mlp: objective": ("megatron_objective", [TX, TW1, TW2]),
    },
}


def smp_type(shape):
    return "f32[%s]" % ", ".join(str(d) for d in shape)


def program(module, cases, fns):
    lines = [
        "# FLAGS: -I tests/run",
        "# Generated by tests/jax/make_values_programs.py. The derivatives behind %s.smp's" % module,
        "# check_grads lines: for each function, jvp's output tangents along check_grads' directions",
        "# (random_normal of argument i's type, seed i) and vjp's input cotangents for its",
        "# cotangents (random_normal of result k's type, seed 500 + k). tests/jax/twins/%s_values.py" % module,
        "# compares them with jax.jvp and jax.vjp.",
        "import %s;" % module,
        "",
        "def main() {",
    ]
    if module == "grad_checks_samples":
        lines.append("  let mx = %s;" % MX)
    for label, (name, exprs) in fns.items():
        f, args = cases[label]
        args = [twin.f32(a) for a in args]
        res = jax.eval_shape(f, *args)
        res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
        n, r = len(args), len(res)
        for i, e in enumerate(exprs):
            lines.append("  let a%d = %s;" % (i, e))
        call = "%s.%s" % (module, name)
        dirs = ", ".join("random_normal(%s, seed=%d)" % (smp_type(a.shape), i) for i, a in enumerate(args))
        outs = ", ".join(["r%d" % k for k in range(r)] + ["t%d" % k for k in range(r)])
        lines.append("  let %s = jvp(%s)(%s, %s);" % (outs, call, ", ".join("a%d" % i for i in range(n)), dirs))
        for k in range(r):
            lines.append('  print("%s: tangent %d", t%d);' % (label, k, k))
        cts = ", ".join("random_normal(%s, seed=%d)" % (smp_type(o.shape), 500 + k) for k, o in enumerate(res))
        outs = ", ".join(["r%d" % k for k in range(r)] + ["c%d" % i for i in range(n)])
        lines.append("  let %s = vjp(%s)(%s, %s);" % (outs, call, ", ".join("a%d" % i for i in range(n)), cts))
        for i in range(n):
            lines.append('  print("%s: cotangent %d", c%d);' % (label, i, i))
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    root = os.path.dirname(os.path.dirname(HERE))
    for module, fns in PROGRAMS.items():
        cases = __import__(module).cases()
        assert set(cases) == set(fns), module
        path = os.path.join(root, "tests", "run", module + "_values.smp")
        with open(path, "w") as f:
            f.write(program(module, cases, fns))
        print("wrote", os.path.relpath(path, root))


if __name__ == "__main__":
    main()
