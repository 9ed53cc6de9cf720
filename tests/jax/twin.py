"""What every JAX twin shares: host devices, meshes, the program's expected output, the
shmapc random generator, comparisons, finite differences and check_grads' metric.

A twin (tests/jax/twins/NAME.py) recomputes in JAX what one .smp program prints and compares
it with the program's .expected file (which the golden test holds shmapc's output to, byte
for byte). It is run as a script by tests/jax/run_twins.py, in the venv of tests/jax/venv.sh:

    PROGRAM = "samples/megatron_mlp.smp"
    def check(t):                      # t: a Checker for PROGRAM's expected output
        t.close("out", mlp(x, w1, w2))
    if __name__ == "__main__":
        twin.main(PROGRAM, check)
"""
import os
import sys

# Eight CPU devices, set before jax is imported.
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402,F401

# XLA's compilations are cached on disk in ~/.cache/shmapc (CPU executables, keyed by the
# program and the jax version), so a second run, and a twin that compiles what another
# already did, skip them. SHMAPC_JAX_CACHE=off turns this off.
_cache = os.environ.get("SHMAPC_JAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "shmapc",
                                                           "jax-compilation-cache"))
if _cache != "off":
    jax.config.update("jax_compilation_cache_dir", _cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

# The twins compute in f32, as the programs do (jax_enable_x64 off); finite differences run
# the same JAX functions in float64 inside `with jax.enable_x64(True)` (in64 below).

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "numpy"))
import shm_rng  # noqa: E402  (random_uniform / random_normal, bit for bit)
from check_samples import parse_expected  # noqa: E402  (the print format, parsed back)

# shard_map: jax.shard_map where the installed JAX has it (0.6+), else the experimental one.
try:
    shard_map = jax.shard_map
except AttributeError:  # pragma: no cover - older JAX
    from jax.experimental.shard_map import shard_map  # noqa: F401

F32 = np.float32

# Variance casts and collectives JAX's public lax lacks (jax 0.10.2): pvary (invariant ->
# varying; public name pcast(..., to="varying")) and all_gather_invariant (varying ->
# invariant, a primitive of JAX's note on efficient transposition; JAX has it privately).
pvary = getattr(jax.lax, "pvary", None) or (lambda v, ax: jax.lax.pcast(v, ax, to="varying"))
try:
    from jax._src.lax.parallel import all_gather_invariant
except ImportError:  # pragma: no cover - a JAX without it
    all_gather_invariant = None


def pmax(x, axes):
    """pmax with a gradient: JAX's lax.pmax has no differentiation rule ("Differentiation rule
    for 'pmax' not implemented"), so the twins write it as the max over the gathered copies,
    which JAX differentiates (ties share the cotangent equally, as shmapc documents). The
    check_grads twins' metric also holds it to float64 finite differences; the program with
    ties (grad_pmax_ties) is checked against finite differences alone."""
    return jnp.max(all_gather_invariant(x, axes, axis=0, tiled=False), axis=0)


def pmin(x, axes):
    """pmin with a gradient, as pmax."""
    return jnp.min(all_gather_invariant(x, axes, axis=0, tiled=False), axis=0)


def mesh(*axes):
    """mesh("i", 4) or mesh(("x", 2), ("y", 4)): devices numbered row-major, as in shmapc."""
    if isinstance(axes[0], str):
        axes = (axes,)
    names = tuple(a for a, _ in axes)
    sizes = tuple(n for _, n in axes)
    count = int(np.prod(sizes))
    return Mesh(np.array(jax.devices()[:count]).reshape(sizes), names)


def smap(m, in_specs, out_specs, check_vma=True):
    """A decorator: @smap(m, (P(), P("i")), P()) def body(...): ... as @shmap in a .smp."""
    def wrap(body):
        return shard_map(body, mesh=m, in_specs=in_specs, out_specs=out_specs,
                         check_vma=check_vma)
    return wrap


def normal(shape, seed):
    """random_normal(f32[shape], seed=seed)."""
    shape = tuple(shape)
    return shm_rng.normal(F32, seed, int(np.prod(shape, dtype=np.int64))).reshape(shape)


def uniform(shape, seed):
    """random_uniform(f32[shape], seed=seed)."""
    shape = tuple(shape)
    return shm_rng.uniform(F32, seed, int(np.prod(shape, dtype=np.int64))).reshape(shape)


def iota(n):
    """iota(f32[n])."""
    return np.arange(n, dtype=F32)


def f32(x):
    return np.asarray(x, dtype=F32)


# ---- finite differences (float64) and check_grads' metric

def in64(f):
    """f run in float64: inputs converted to f64 numpy arrays, under jax.enable_x64, results
    returned as numpy f64 (a tuple if f returns several)."""
    def g(*args):
        with jax.enable_x64(True):
            out = f(*[np.asarray(a, dtype=np.float64) for a in args])
            if isinstance(out, (tuple, list)):
                return tuple(np.asarray(o, dtype=np.float64) for o in out)
            return np.asarray(out, dtype=np.float64)
    return g


def fd_grad(f, args, argnums=0, eps=1e-6):
    """Central-difference gradient of a scalar function f(*args) in float64, one element at a
    time, for the arguments in argnums (an int or a tuple). f takes and returns numpy float64."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    args = [np.asarray(a, dtype=np.float64) for a in args]
    grads = []
    for k in nums:
        g = np.zeros_like(args[k])
        flat = g.reshape(-1)
        for j in range(flat.size):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[k].reshape(-1)[j] += eps
            minus[k].reshape(-1)[j] -= eps
            flat[j] = (float(f(*plus)) - float(f(*minus))) / (2 * eps)
        grads.append(g)
    return grads[0] if single else tuple(grads)


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def check_grads_directions(args, results, seed=0):
    """The directions check_grads(f, args..., seed=seed) draws (compiler/sema/Transforms.cpp):
    random_normal of argument i's type with seed 1000*seed + i, and of result k's type with
    seed 1000*seed + 500 + k."""
    dirs = [normal(np.shape(a), 1000 * seed + i) for i, a in enumerate(args)]
    cts = [normal(np.shape(r), 1000 * seed + 500 + k) for k, r in enumerate(results)]
    return dirs, cts


def check_grads_metric(f, args, seed=0, eps=1e-3, f64=None):
    """check_grads' number, recomputed with JAX's jvp and vjp:
    max(|fd - fwd|, |rev - fwd|) / max(|fd|, |fwd|, |rev|, 1e-6), where fwd = <ct, jvp(d)>,
    rev = <vjp(ct), d> (JAX, f32) and fd = <ct, (f(x + eps d) - f(x - eps d)) / 2 eps>, here in
    float64 (f64: a float64 version of f; by default f itself on float64 inputs).
    Returns (metric, fd, fwd, rev)."""
    args = [f32(a) for a in args]
    f = jax.jit(f)  # one compilation each for jvp, vjp and the f64 forward, not one per op
    results = _tuple(jax.eval_shape(f, *args))
    dirs, cts = check_grads_directions(args, results, seed)
    _, tangents = jax.jit(lambda a, d: jax.jvp(lambda *a: _tuple(f(*a)), a, d))(
        tuple(args), tuple(dirs))
    fwd = sum(float(np.vdot(c.astype(np.float64), np.asarray(t, np.float64)))
              for c, t in zip(cts, tangents))
    cot = jax.jit(lambda a, c: jax.vjp(lambda *a: _tuple(f(*a)), *a)[1](c))(
        tuple(args), tuple(jnp.asarray(c) for c in cts))
    rev = sum(float(np.vdot(np.asarray(g, np.float64), d.astype(np.float64)))
              for g, d in zip(cot, dirs))
    g = f64 or in64(f)
    a64 = [a.astype(np.float64) for a in args]
    plus = _tuple(g(*[a + eps * d for a, d in zip(a64, dirs)]))
    minus = _tuple(g(*[a - eps * d for a, d in zip(a64, dirs)]))
    fd = sum(float(np.vdot(c.astype(np.float64), np.asarray(p, np.float64) - np.asarray(m, np.float64)))
             for c, p, m in zip(cts, plus, minus)) / (2 * eps)
    scale = max(abs(fd), abs(fwd), abs(rev), 1e-6)
    return max(abs(fd - fwd), abs(rev - fwd)) / scale, fd, fwd, rev


def check_derivatives(t, cases, rtol=1e-4, atol=1e-5, loose=None):
    """For the values programs (tests/jax/make_values_programs.py): for each label -> (f,
    args) of cases, the printed "LABEL: tangent k" is JAX's jvp along check_grads' directions
    and "LABEL: cotangent i" JAX's vjp of check_grads' cotangents. loose: label -> (rtol,
    atol, why) for the cases that need more room."""
    for label, (f, args) in cases.items():
        args = [f32(a) for a in args]
        fj = jax.jit(f)
        results = _tuple(jax.eval_shape(fj, *args))
        dirs, cts = check_grads_directions(args, results)
        _, tangents = jax.jit(lambda a, d: jax.jvp(lambda *a: _tuple(fj(*a)), a, d))(
            tuple(args), tuple(dirs))
        cot = jax.jit(lambda a, c: jax.vjp(lambda *a: _tuple(fj(*a)), *a)[1](c))(
            tuple(args), tuple(jnp.asarray(c) for c in cts))
        r, a, how = rtol, atol, "JAX"
        if loose and label in loose:
            r, a, why = loose[label]
            how = "JAX; %s" % why
        for k, tk in enumerate(tangents):
            t.close("%s: tangent %d" % (label, k), tk, rtol=r, atol=a, how="jvp, " + how)
        for i, ci in enumerate(cot):
            t.close("%s: cotangent %d" % (label, i), ci, rtol=r, atol=a, how="vjp, " + how)


# ---- the checker

class Checker:
    """Compares recomputed values with one program's expected output, label by label."""

    def __init__(self, program):
        self.program = program
        path = os.path.join(ROOT, os.path.splitext(program)[0] + ".expected")
        self.expected = parse_expected(path)
        self.checked = set()
        self.failures = 0

    def _report(self, ok, label, how, detail=""):
        print("%s %s: %s%s" % ("ok  " if ok else "FAIL", label, how, detail))
        if not ok:
            self.failures += 1

    def _get(self, label, index):
        if label not in self.expected:
            self._report(False, label, "not printed by the program")
            return None
        self.checked.add(label)
        value = self.expected[label]
        if index is not None:
            if not isinstance(value, list):
                value = [value]
            value = value[index]
        return value

    def close(self, label, value, rtol=1e-4, atol=1e-5, how="JAX", index=None):
        """The printed value of label (its index-th print if printed repeatedly) is close to
        value: |printed - value| <= atol + rtol |value| element-wise (numpy's allclose)."""
        want = self._get(label, index)
        if want is None:
            return
        if isinstance(want, list):
            want = np.stack(want)
        got = np.asarray(value, dtype=np.float64)
        want64 = np.asarray(want, dtype=np.float64)
        tol = "rtol %g, atol %g" % (rtol, atol)
        name = label if index is None else "%s [%d]" % (label, index)
        if got.shape != want64.shape:
            self._report(False, name, how, " shape: printed %s, recomputed %s" % (
                want64.shape, got.shape))
            return
        ok = np.allclose(want64, got, rtol=rtol, atol=atol, equal_nan=True)
        err = np.max(np.abs(want64 - got)) if got.size else 0.0
        detail = " (%s; max abs diff %.3g)" % (tol, err)
        if not ok:
            detail += "\n    printed    %s\n    recomputed %s" % (
                np.array2string(want64, precision=6).replace("\n", "\n" + " " * 15),
                np.array2string(got, precision=6).replace("\n", "\n" + " " * 15))
        self._report(ok, name, how, detail)

    def close_tree(self, label, tree, **kw):
        """Each leaf of a JAX pytree is close to the program's print of label + its path, in
        the program's path syntax: a dict key k is `.k`, a tuple or list element i is `[i]`."""
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            self.close(label + tree_path(path), leaf, **kw)

    def equal(self, label, value, how="JAX", index=None):
        """The printed value (bool or integer) equals value exactly."""
        want = self._get(label, index)
        if want is None:
            return
        got = np.asarray(value)
        ok = np.shape(want) == got.shape and bool(np.all(np.asarray(want) == got))
        self._report(ok, label, how, "" if ok else " printed %s, recomputed %s" % (want, got))

    def finish(self):
        for label in sorted(set(self.expected) - self.checked):
            self._report(False, label, "printed but not checked by the twin")
        return self.failures


def tree_path(path):
    """A jax.tree_util key path in the program's syntax: `.w`, `[0]`."""
    out = ""
    for k in path:
        if isinstance(k, jax.tree_util.DictKey):
            out += "." + str(k.key)
        elif isinstance(k, jax.tree_util.SequenceKey):
            out += "[%d]" % k.idx
        elif isinstance(k, jax.tree_util.GetAttrKey):
            out += "." + k.name
        else:
            raise ValueError("no program path for key %r" % (k,))
    return out


def main(program, check):
    print("== %s" % program)
    t = Checker(program)
    check(t)
    failures = t.finish()
    print("%s: %s" % (program, "agrees" if not failures else "%d disagreement(s)" % failures))
    sys.exit(1 if failures else 0)
