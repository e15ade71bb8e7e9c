import sys
import time

import torch

from profiler import TransferProfiler
from profiler.atomic import write_csv

prof = TransferProfiler(mode="pageable", device="cpu", scenario="pageable/cpu-test")


class Slow:
    def __iter__(self):
        for _i in range(8):
            time.sleep(0.002)
            yield torch.randn(64, 64)


for b in prof.batches(Slow()):
    prof.to_device(b)
    with prof.cpu_work():
        time.sleep(0.001)
    with prof.compute():
        time.sleep(0.0005)
write_csv(prof.timeline(), __import__("pathlib").Path(sys.argv[1]) / "timeline.csv")
