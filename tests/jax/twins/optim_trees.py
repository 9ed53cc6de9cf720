"""tests/run/optim_trees.smp: stdlib/optim.smp's optimizers on a dict-of-tuple pytree against
optax 0.2.8 (sgd with momentum, adam, adamw after clip_by_global_norm with a
warmup_cosine_decay_schedule learning rate; optax.global_norm), five steps each from the same
start (f32; rtol 1e-4, atol 1e-5: a few ulp per step)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import optax
import twin
from twin import jax, jnp

PROGRAM = "tests/run/optim_trees.smp"


def loss(p, x, y):
    h = jnp.tanh(x @ p["layers"][0] + p["b"])
    out = h @ p["layers"][1]
    return jnp.mean((out - y) * (out - y))


def run(opt, params, x, y, steps=5, clip=None, t=None):
    state = opt.init(params)
    for _ in range(steps):
        g = jax.grad(loss)(params, x, y)
        if clip is not None:
            t.close("norm", optax.global_norm(g), index=_)
            g, _s = clip.update(g, clip.init(g))
        updates, state = opt.update(g, state, params)
        params = optax.apply_updates(params, updates)
    return params, state


def check(t):
    start = {"layers": (twin.normal((3, 4), 1) * 0.5, twin.normal((4, 2), 2) * 0.5), "b": jnp.zeros(4, jnp.float32)}
    x, y = twin.normal((8, 3), 3), twin.normal((8, 2), 4)

    p, s = run(optax.sgd(0.1, momentum=0.9), start, x, y)
    t.close_tree("sgd", p)
    t.close_tree("sgd trace", s[0].trace)

    p, s = run(optax.adam(0.05, b1=0.9, b2=0.999, eps=1e-8), start, x, y)
    t.close_tree("adam", p)
    t.equal("adam state.count", s[0].count)
    t.close_tree("adam state.mu", s[0].mu)
    t.close_tree("adam state.nu", s[0].nu)

    sched = optax.warmup_cosine_decay_schedule(0.0, 0.2, 2, 5, 0.01)
    for k in range(5):
        t.close("lr", sched(k), index=k)
    opt = optax.adamw(sched, b1=0.9, b2=0.99, eps=1e-6, weight_decay=0.1)
    p, s = run(opt, start, x, y, clip=optax.clip_by_global_norm(0.7), t=t)
    t.close_tree("adamw", p)
    t.equal("adamw state.count", s[0].count)
    t.close_tree("adamw state.mu", s[0].mu)
    t.close_tree("adamw state.nu", s[0].nu)
    t.close("loss", loss(p, x, y))


if __name__ == "__main__":
    twin.main(PROGRAM, check)
