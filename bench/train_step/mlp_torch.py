"""The MLP training step of bench/train_step/run.py in PyTorch (one thread): prints the mean
step time in ms. Exits 1 when torch is not installed (run.py then says so)."""
import sys
import time
try:
    import torch
except ImportError:
    sys.exit(1)
torch.set_num_threads(1)
B, D, H = 256, 512, 1024
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
g = torch.Generator().manual_seed(0)
x, y = torch.randn(B, D, generator=g), torch.randn(B, D, generator=g)
w1 = (torch.randn(D, H, generator=g) * 0.05).requires_grad_()
w2 = (torch.randn(H, D, generator=g) * 0.05).requires_grad_()
b1, b2 = torch.zeros(H, requires_grad=True), torch.zeros(D, requires_grad=True)
times = []
for _ in range(steps + 2):
    t0 = time.perf_counter()
    loss = ((torch.relu(x @ w1 + b1) @ w2 + b2 - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        for p in (w1, b1, w2, b2):
            p -= 0.01 * p.grad
            p.grad = None
    times.append(time.perf_counter() - t0)
print("%.4f" % (sum(times[2:]) / steps * 1e3))
