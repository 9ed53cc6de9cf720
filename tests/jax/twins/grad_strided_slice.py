"""tests/run/grad_strided_slice.smp: strided slices differentiated and transposed. Against
JAX (jax.grad, jax.linear_transpose); the values are small multiples of 0.1, rtol 1e-4, atol
1e-5. check_grads is recomputed with JAX's jvp/vjp along shmapc's directions (fd in
float64) and must give the printed verdict."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from twin import jax, jnp, f32, iota

PROGRAM = "tests/run/grad_strided_slice.smp"


def every_other(x):
    return jnp.sum(x[::2] * f32([1.0, 2.0, 3.0, 4.0]))


def strided_2d(x):
    y = x[1:6:3, ::2]
    return jnp.sum(y * y) + jnp.sum(x[0:5:4, 1:4:2] * 3.0)


def pick(x):
    return x[0:3:2, 1:7:2] * 2.0


def check(t):
    t.close("d/dx every_other", jax.grad(every_other)(iota(8)))
    x = iota(42).reshape(6, 7) * 0.1
    t.close("d/dx strided_2d", jax.grad(strided_2d)(x))
    metric = twin.check_grads_metric(strided_2d, [x])[0]
    t.equal("strided_2d check", metric < 0.01, how="JAX jvp/vjp vs float64 fd: %.2g" % metric)
    (tp,) = jax.linear_transpose(pick, jax.ShapeDtypeStruct((3, 7), jnp.float32))(
        jnp.ones((2, 3), jnp.float32))
    t.close("transpose(pick)", tp)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
