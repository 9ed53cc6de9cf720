"""tests/run/collectives_rooted.smp: broadcast, reduce (sum, max, prod), gather and scatter
onto / from one device. JAX's shard_map has no rooted collectives but lax.pbroadcast(x, axis,
source), which has no CPU lowering ("MLIR translation rule for primitive 'pbroadcast' not found
for platform cpu"), so each is written on the global array, device d's block being row d of x:
broadcast from 2 is row 2; reduce onto 1 is the reduction over rows in row 1 and zeros
elsewhere; gather onto 0 is every row in row 0's block; scatter from 0 gives row d of device
0's block to device d. The loss through all of them is differentiated by JAX, and its
check_grads verdict recomputed; and reduce's gradients with a tie for the maximum, a product with
one zero and with two, and the mean."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, iota

PROGRAM = "tests/run/collectives_rooted.smp"


def onto(row, value):
    """[4, 2]: `value` in row `row`, zeros elsewhere."""
    return jnp.zeros((4, 2), value.dtype).at[row].set(value)


def rooted(x):
    r = x.reshape(4, 2)
    g = jnp.zeros((4, 8), x.dtype).at[0].set(x)  # device 0 holds every row
    return (r[2], onto(1, r.sum(0)), onto(1, r.max(0)), onto(3, r.prod(0)), g,
            g[0].reshape(4, 2))


def loss(x, w):
    r, wr = x.reshape(4, 2), w.reshape(4, 2)
    b = r[2]
    s = onto(1, (r * wr).sum(0))
    mx, pr = onto(1, r.max(0)), onto(3, r.prod(0))
    g = jnp.zeros((4, 8), x.dtype).at[0].set(x)
    sc = (g * g)[0].reshape(4, 2)
    return jnp.sum(b * wr) + jnp.sum(s * s) + jnp.sum(mx) + jnp.sum(pr) + jnp.sum(sc * wr)


def edges(x):
    r = x.reshape(4, 2)
    return jnp.sum(r.max(0)) + jnp.sum(r.prod(0)) + jnp.sum(r.mean(0) ** 2)


def check(t):
    x = jnp.sin(iota(8) + 1.0)
    b, s, mx, pr, g, sc = rooted(x)
    t.close("broadcast from 2", b)
    t.close("reduce sum onto 1", s.reshape(-1))
    t.close("reduce max onto 1", mx.reshape(-1))
    t.close("reduce prod onto 3", pr.reshape(-1))
    t.close("gather onto 0", g.reshape(-1))
    t.close("scatter from 0", sc.reshape(-1))
    t.close("broadcast of a replicated value", x)
    t.close("scatter of a replicated value", x)
    w = jnp.cos(iota(8))
    t.close("loss", loss(x, w))
    gx, gw = jax.grad(loss, argnums=(0, 1))(x, w)
    t.close("grad x", gx)
    t.close("grad w", gw)
    metric, _, _, _ = twin.check_grads_metric(loss, [x, w])
    t.equal("check_grads", metric < 0.01, how="JAX jvp/vjp vs float64 fd: %.2g" % metric)
    e = jnp.array([1.0, 0.0, 3.0, 2.0, 3.0, 0.0, 0.0, 1.5], jnp.float32)
    t.close("edges", edges(e))
    # (JAX's max shares a tie's cotangent equally, and its prod's gradient is right with zeros)
    t.close("grad edges", jax.grad(edges)(e))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
