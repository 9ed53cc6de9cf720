"""tests/run/jit_control.smp: loops and conditionals in jit functions, under jax.jit with the
same shardings (fori_loop, while_loop and cond), values and gradients."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, iota
from jax.sharding import NamedSharding

PROGRAM = "tests/run/jit_control.smp"
m = twin.mesh(("X", 2), ("Y", 2))


def S(*spec):
    return NamedSharding(m, P(*spec))


def layers_fn(x, w):
    return jax.lax.fori_loop(0, 3, lambda k, h: jnp.tanh(h @ w), x)


def halve_fn(a):
    return jax.lax.while_loop(lambda b: jnp.sum(b * b) > 1.0, lambda b: b * 0.5, a)


def choose_fn(a, s):
    return jax.lax.cond(s > 0.0, lambda: a * s, lambda: jnp.sin(a))


layers = jax.jit(layers_fn, in_shardings=(S("X", "Y"), S("Y", None)))
halve_until_small = jax.jit(halve_fn, in_shardings=S("X", "Y"))
choose = jax.jit(choose_fn, in_shardings=(S("X"), S()))


def loss(x, w, a):
    return jnp.sum(layers(x, w)) + jnp.sum(choose(a, 0.5) * choose(a, -1.0))


def check(t):
    x = jnp.sin(iota(128).reshape(8, 16))
    w = jnp.cos(iota(256).reshape(16, 16)) * 0.3
    t.close("layers row 0", layers(x, w)[0])
    a = iota(32).reshape(8, 4) * 0.1
    t.close("halved", halve_until_small(a))
    t.close("choose +", choose(a, 2.0)[1])
    t.close("choose -", choose(a, -2.0)[1])
    gx, gw, ga = jax.grad(loss, argnums=(0, 1, 2))(x, w, a)
    t.close("grad x row 2", gx[2])
    t.close("grad w row 0", gw[0])
    t.close("grad a", ga)
    metric, _, _, _ = twin.check_grads_metric(loss, [x, w, a])
    t.equal("check_grads", metric < 0.01, how="JAX jvp/vjp vs float64 fd: %.2g" % metric)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
