"""The MLP training step of bench/train_step/run.py in numpy (one BLAS thread): prints the mean
step time in ms."""
import os
import sys
import time
import numpy as np

B, D, H = 256, 512, 1024
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
rng = np.random.default_rng(0)
x, y = rng.standard_normal((B, D), np.float32), rng.standard_normal((B, D), np.float32)
w1, w2 = rng.standard_normal((D, H), np.float32) * 0.05, rng.standard_normal((H, D), np.float32) * 0.05
b1, b2 = np.zeros(H, np.float32), np.zeros(D, np.float32)
times = []
for _ in range(steps + 2):
    t0 = time.perf_counter()
    h = np.maximum(x @ w1 + b1, 0)
    d = h @ w2 + b2 - y
    dout = d * np.float32(2.0 / d.size)
    gw2, gb2 = h.T @ dout, dout.sum(0)
    dh = (dout @ w2.T) * (h > 0)
    gw1, gb1 = x.T @ dh, dh.sum(0)
    w1 -= 0.01 * gw1; b1 -= 0.01 * gb1; w2 -= 0.01 * gw2; b2 -= 0.01 * gb2
    times.append(time.perf_counter() - t0)
print("%.4f" % (np.mean(times[2:]) * 1e3))
