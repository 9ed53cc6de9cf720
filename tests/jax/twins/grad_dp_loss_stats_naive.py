"""tests/run/grad_dp_loss_stats_naive.smp: the program of grad_dp_loss_stats.smp compiled with
--transpose=naive; the same labels and values, checked by the same code (see
grad_dp_loss_stats.py)."""
import os, sys; sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import twin
from grad_dp_loss_stats import check

PROGRAM = "tests/run/grad_dp_loss_stats_naive.smp"

if __name__ == "__main__":
    twin.main(PROGRAM, check)
