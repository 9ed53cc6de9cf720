"""tests/run/pipeline_inference.smp: the inference schedule's results (per-example outputs
concatenated over 4 micro-batches, a mean over the batch, a value of the parameters alone)
equal the same model evaluated by JAX on the whole batch (f32; rtol 1e-5, atol 1e-6), with
stage 1's layer a shard_map over "data"."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, P, smap

PROGRAM = "tests/run/pipeline_inference.smp"
m = twin.mesh(("data", 2))


@smap(m, (P("data", None), P(), P()), P("data", None))
def dense(x, w, b):
    return jnp.tanh(x @ w + b)


def evaluate(p, x):
    y = dense(jnp.tanh(x @ p["w1"]), p["w2"], p["b2"])
    return y, jnp.mean(y * y), jnp.sum(p["w1"])


def check(t):
    p = {"w1": twin.normal((4, 6), 1) * 0.5, "w2": twin.normal((6, 3), 2) * 0.5, "b2": twin.normal((3,), 3) * 0.1}
    x = twin.normal((16, 4), 4)
    y, msq, s = jax.jit(evaluate)(p, x)
    t.close("y[0:3]", y[0:3], rtol=1e-5, atol=1e-6)
    t.close("y[13:16]", y[13:16], rtol=1e-5, atol=1e-6)
    t.close("mean square", msq, rtol=1e-5, atol=1e-6)
    t.close("sum w1", s, rtol=1e-5, atol=1e-6)
    t.close("max |y - outside|", 0.0, atol=0.0)
    t.close("mean square outside", msq, rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
