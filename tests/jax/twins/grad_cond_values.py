"""tests/run/grad_cond_values.smp: the gradients of grad_cond.smp's shmaps whose cond predicate
varies over devices. JAX cannot differentiate these (grad_cond.py's docstring: its transpose
of such a cond deadlocks), so each gradient is checked against float64 central finite
differences of a numpy simulation of the shmap (in grad_cond.py), element by element.
rtol 1e-4, atol 1e-6: the fd error is ~1e-9, shmapc's f32 error ~1e-6 relative."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from grad_cond import np_varying_pred, np_varying_pred_psum, np_varying_pred_2d, np_data_pred

PROGRAM = "tests/run/grad_cond_values.smp"
FD = "float64 central differences (JAX deadlocks on a device-varying cond)"


def check(t):
    x = twin.normal((8,), 1) * 0.5
    w = twin.normal((2,), 2) * 0.5
    for name, f, args, a in [("varying_pred", np_varying_pred, [x, w], "x"),
                             ("varying_pred_psum", np_varying_pred_psum, [x, w], "x"),
                             ("varying_pred_2d", np_varying_pred_2d, [x.reshape(4, 2), w], "a"),
                             ("data_pred", np_data_pred, [x, w], "x")]:
        ga, gw = twin.fd_grad(f, args, argnums=(0, 1))
        t.close("%s d/d%s" % (name, a), ga, rtol=1e-4, atol=1e-6, how=FD)
        t.close("%s d/dw" % name, gw, rtol=1e-4, atol=1e-6, how=FD)


if __name__ == "__main__":
    twin.main(PROGRAM, check)
