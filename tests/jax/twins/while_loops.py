"""tests/run/while_loops.smp: while loops on the host and in shmap bodies, and jvp through them.

Every printed value is recomputed with jax.lax.while_loop (inside shard_map for the shmap
functions) and, for the jvps, jax.jvp through that while_loop. The --stats table is checked
from the trip counts JAX's loops take: each psum and pmax runs once before its loop and once
per iteration, and the byte model of docs/runtime.md (an all-reduce of E elements over n
devices: (n-1) E bytes sent and received per group) gives the bytes.
"""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, P, smap, f32

PROGRAM = "tests/run/while_loops.smp"
while_loop = jax.lax.while_loop
m = twin.mesh("i", 4)


def collatz_steps(n):
    def body(c):
        x, s = c
        return jnp.where(x % 2 == 0, x // 2, 3 * x + 1), s + 1
    return while_loop(lambda c: c[0] != 1, body, (jnp.int32(n), jnp.int32(0)))[1]


def newton_sqrt(a):
    def body(c):
        x, _ = c
        nx = 0.5 * (x + a / x)
        return nx, jnp.abs(nx - x)
    return while_loop(lambda c: c[1] > 1e-6, body, (a, jnp.float32(1.0)))[0]


@smap(m, P("i"), (P("i"), P("i")))
def halve_until_small(x):
    def body(c):
        return c[0] * 0.5, c[1] + 1
    return while_loop(lambda c: jnp.max(jnp.abs(c[0])) >= 1.0, body, (x, jnp.zeros((1,), jnp.int32)))


@smap(m, P("i"), (P("i"), P()))
def halve_together(x):
    busy = lambda y: twin.pmax(jnp.max(jnp.abs(y)), "i") >= 1.0
    def body(c):
        y, _, r = c
        y = jnp.where(jnp.abs(y) >= 1.0, y * 0.5, y)
        return y, busy(y), r + 1
    y, _, r = while_loop(lambda c: c[1], body, (x, busy(x), jnp.int32(0)))
    return y, r


@smap(m, P("i"), (P("i"), P()))
def grow_until(x):
    def body(c):
        y, _, s = c
        y = y * 2.0 + 1.0
        return y, jax.lax.psum(jnp.sum(y), "i"), s + 1
    y, _, s = while_loop(lambda c: c[1] < 1000.0, body, (x, jax.lax.psum(jnp.sum(x), "i"), jnp.int32(0)))
    return y, s


def grown_sum(x):
    y, _ = grow_until(x)
    return jnp.sum(y * y)


def check(t):
    for n in (1, 6, 27, 97):
        t.equal("collatz %d" % n, collatz_steps(n))
    t.close("sqrt 2", newton_sqrt(jnp.float32(2.0)))
    t.close("sqrt 1e4", newton_sqrt(jnp.float32(10000.0)))
    t.close("jvp sqrt 2", jax.jvp(newton_sqrt, (jnp.float32(2.0),), (jnp.float32(1.0),))[1])
    t.close("untouched", f32([3.0, -1.0]))  # the condition k < 0 is false at once

    total = 0
    for i in range(1, 6):
        j = i
        while j > 0:
            total, j = total + j, j - 2
    t.equal("nested", total)
    acc = np.float32(1.0)
    while acc < 100.0:
        for _ in range(3):
            acc = np.float32(acc * np.float32(1.5))
    t.close("for inside while", acc)

    x = f32([0.5, 3.0, -9.0, 0.25, 100.0, 0.0, 2.0, -1.0])
    y, n = halve_until_small(x)
    t.close("halved", y)
    t.equal("halvings per device", n)
    y2, rounds = halve_together(x)
    t.close("halved together", y2)
    t.equal("rounds", rounds)
    g, steps = grow_until(x)
    t.close("grown", g)
    t.equal("steps", steps)
    dx = f32([1, 0, 0, 0, 0, 0, 0, 1])
    gv, gt = jax.jvp(grown_sum, (x,), (dx,))
    t.close("grown_sum", gv)
    t.close("jvp grown_sum", gt)

    # --stats: psum runs before the loop and once per iteration, in grow_until and in the
    # jvp's primal (the tangent of the total only steers the loop, so it is not summed);
    # pmax likewise in halve_together. 4 devices, one f32: 3 * 4 bytes sent per call.
    psums = 2 * (1 + int(steps))
    pmaxes = 1 + int(rounds)
    with open(os.path.join(twin.ROOT, PROGRAM.replace(".smp", ".expected"))) as f:
        table = f.read().split("== shmap collective stats ==\n", 1)[1].splitlines()[1:]
    rows = {line.split()[0]: [int(v) for v in line.split()[1:]] for line in table if line.strip()}
    for name, calls in (("psum", psums), ("pmax", pmaxes)):
        want = [calls, 12 * calls, 12 * calls]
        t._report(rows.get(name) == want, "stats " + name, "trip counts of JAX's loops",
                  "" if rows.get(name) == want else " printed %s, recomputed %s" % (rows.get(name), want))
    t._report(sorted(rows) == ["pmax", "psum"], "stats rows", "only psum and pmax communicate")


if __name__ == "__main__":
    twin.main(PROGRAM, check)
