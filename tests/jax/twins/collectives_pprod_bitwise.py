"""tests/run/collectives_pprod_bitwise.smp: pprod, pand, por, pxor. JAX has no product or
bitwise all-reduce, so each is the reduction over the device axis of the global array (device
d's block is row d): the product's values and JAX's gradient of it (jnp.prod's, correct with
zeros), numpy's bitwise and wrapping integer reductions, compared exactly."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import twin
from twin import jax, jnp, iota

PROGRAM = "tests/run/collectives_pprod_bitwise.smp"


def products(x):
    return jnp.prod(x.reshape(4, 3), axis=0)


def prod_loss(x, w):
    return jnp.sum(products(x) * w)


def check(t):
    w = iota(3) + 1.0
    x = jnp.sin(iota(12) + 0.5) * 2.0
    idx = np.arange(12)
    one = jnp.where(idx == 4, 0.0, x)
    two = jnp.where((idx == 1) | (idx == 7), 0.0, x)
    t.close("pprod", products(x))
    t.close("pprod, one zero", products(one))
    grad = jax.grad(prod_loss)
    t.close("grad, no zeros", grad(x, w))
    t.close("grad, one zero", grad(one, w))
    t.close("grad, two zeros", grad(two, w))
    metric, _, _, _ = twin.check_grads_metric(prod_loss, [x, w])
    t.equal("check_grads", metric < 0.01, how="JAX jvp/vjp vs float64 fd: %.2g" % metric)
    k = (np.arange(8, dtype=np.int32) * 3 + 5).reshape(4, 2)
    b = (np.arange(8) % 3 == 0).reshape(4, 2)
    how = "numpy"
    t.equal("pprod i32", np.prod(k, axis=0, dtype=np.int32), how=how)
    t.equal("pand i32", np.bitwise_and.reduce(k, axis=0), how=how)
    t.equal("por i32", np.bitwise_or.reduce(k, axis=0), how=how)
    t.equal("pxor i32", np.bitwise_xor.reduce(k, axis=0), how=how)
    t.equal("pand bool", np.logical_and.reduce(b, axis=0), how=how)
    t.equal("por bool", np.logical_or.reduce(b, axis=0), how=how)
    t.equal("pxor bool", np.logical_xor.reduce(b, axis=0), how=how)
    with np.errstate(over="ignore"):
        t.equal("pprod i32 wraps", np.prod(np.full((4, 2), 100000, np.int32), axis=0, dtype=np.int32), how=how)
    r = np.arange(2, dtype=np.float32) + 2
    t.close("pprod of a replicated value", r ** 4)
    ri = np.arange(2, dtype=np.int32) + 6
    t.equal("pand of a replicated value", ri, how=how)
    t.equal("pxor of a replicated value", ri ^ ri ^ ri ^ ri, how=how)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
