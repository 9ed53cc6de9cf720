"""tests/run/effects_under_grad.smp: print and save in differentiated functions. JAX is the
oracle of what the effects see and how often: the same functions with jax.debug.callback in
place of print/save, run under jax.grad, jax.value_and_grad, jax.jvp and grad of grad, record
each value the callback was called with; the program's "f sees" / "g sees" lines must be those
values, in that order, as many times (each once per derivative, with the forward values), and
the loads must read back the last value saved. The derivatives: against JAX, rtol 1e-6."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp

PROGRAM = "tests/run/effects_under_grad.smp"


def check(t):
    seen = {"f": [], "g": []}
    record = lambda name: (lambda v: seen[name].append(np.asarray(v)))

    def f(x):
        jax.debug.callback(record("f"), x)
        return x * x

    def g(x):
        jax.debug.callback(record("g"), x)
        return jnp.sin(x)

    x3 = jnp.float32(3.0)
    t.close("f(3)", f(x3), rtol=1e-6)
    t.close("grad f(3)", jax.grad(f)(x3), rtol=1e-6)
    t.close("saved under grad", seen["f"][-1], rtol=0, atol=0)
    _, d = jax.value_and_grad(f)(jnp.float32(2.0))
    t.close("value_and_grad f(2)", d, rtol=1e-6)
    t.close("saved under value_and_grad", seen["f"][-1], rtol=0, atol=0)
    x = jnp.arange(3, dtype=jnp.float32)
    _, tangent = jax.jvp(g, (x,), (jnp.ones(3, jnp.float32),))
    t.close("jvp g", tangent, rtol=1e-6)
    t.close("saved under jvp", 2 * seen["g"][-1], rtol=0, atol=0)  # savez's "twice" = x + x
    t.close("grad grad f(5)", jax.grad(jax.grad(f))(jnp.float32(5.0)), rtol=1e-6)
    t.close("saved under grad grad", seen["f"][-1], rtol=0, atol=0)
    for name in ("f", "g"):
        printed = t.expected.get(name + " sees")
        printed = printed if isinstance(printed, list) else [printed]
        if len(printed) != len(seen[name]):
            t._report(False, name + " sees", "JAX's callback ran %d times, the program printed %d lines"
                      % (len(seen[name]), len(printed)))
            t.checked.add(name + " sees")
            continue
        for k, v in enumerate(seen[name]):
            t.close(name + " sees", v, rtol=0, atol=0, how="jax.debug.callback", index=k if len(printed) > 1 else None)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
