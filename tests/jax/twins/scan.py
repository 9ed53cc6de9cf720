"""tests/run/scan.smp: scan with consts, reverse, several carries, length=, and inside a shmap
with a psum in the step; gradients through scans. Against jax.lax.scan (closures for the
consts) and jax.grad, rtol 1e-4; the integer Fibonacci stack exactly."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap, f32

PROGRAM = "tests/run/scan.smp"
scan = jax.lax.scan
m = twin.mesh("i", 4)


def rnn_step(w):
    def step(h, x):
        h2 = jnp.tanh(h * w + x)
        return h2, (h2, jnp.sum(h2))
    return step


def rnn(w, xs):
    h, (hs, totals) = scan(rnn_step(w), jnp.zeros(4, jnp.float32), xs)
    return jnp.sum(hs * hs) + jnp.sum(totals) + jnp.sum(h)


def rnn_reverse(w, xs):
    h, (hs, totals) = scan(rnn_step(w), jnp.zeros(4, jnp.float32), xs, reverse=True)
    return jnp.sum(hs * hs) + jnp.sum(totals)


@smap(m, P(None, "i"), P())
def global_running_sums(xs):
    def step(acc, x):
        a = acc + x
        return a, jax.lax.psum(a, "i")
    # JAX wants the carry's variance written out; shmapc finds it by a fixed point.
    return scan(step, twin.pvary(jnp.zeros(2, jnp.float32), "i"), xs)[1]


def check(t):
    c, ys = scan(lambda c, x: (c * x, c * x), jnp.float32(1.0), f32([1, 2, 3, 4]))
    t.close("cumprod", ys)
    t.close("product", c)
    w = f32([0.5, -0.3, 0.8, 1.1])
    xs = twin.iota(24).reshape(6, 4) / 24.0 - 0.4
    t.close("rnn", rnn(w, xs))
    gw, gx = jax.grad(rnn, argnums=(0, 1))(w, xs)
    t.close("rnn d/dw", gw)
    t.close("rnn d/dxs", gx)
    t.close("rnn_reverse", rnn_reverse(w, xs))
    t.close("rnn_reverse d/dw", jax.grad(rnn_reverse)(w, xs))
    _, fibs = scan(lambda ab, _: ((ab[1], ab[0] + ab[1]), ab[0]), (jnp.int32(0), jnp.int32(1)), None, length=10)
    t.equal("fibonacci", fibs)
    big = twin.iota(40).reshape(5, 8) / 10.0
    t.close("global running sums", global_running_sums(big))
    t.close("shmap d/dxs", jax.grad(lambda x: jnp.sum(global_running_sums(x) ** 2))(big))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
