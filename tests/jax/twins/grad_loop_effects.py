"""tests/run/grad_loop_effects.smp: two SGD steps of sum(w * w) under value_and_grad, with
prints inside an `if` and an inner loop (which the program must not drop). Against JAX: the
losses, the first gradient's squared norm and the final weights."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp

PROGRAM = "tests/run/grad_loop_effects.smp"


def check(t):
    f = lambda w: jnp.sum(w * w)
    w = jnp.array([1.0, 2.0], jnp.float32)
    for step in range(2):
        l, g = jax.value_and_grad(f)(w)
        t.close("loss", l, index=step)
        if step == 0:
            t.close("first gradient norm^2", jnp.sum(g * g))
        for k in range(2):
            t.equal("inner", step * 10 + k, index=2 * step + k)
        w = w - 0.1 * g
    t.close("w", w)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
