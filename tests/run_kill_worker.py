"""`pinprof run` whose second DataLoader worker kills itself at its 40th item (SIGKILL), for
tests/test_reliability.py. Workers are forked, so they run the patched dataset.

python tests/run_kill_worker.py OUT
"""

import os
import signal
import sys

import torch.utils.data

from profiler.cli import main
from profiler.drivers import datasets

served = 0
original = datasets.SyntheticImages.__getitem__


def dying_getitem(self: datasets.SyntheticImages, index: int):  # type: ignore[no-untyped-def]
    global served
    info = torch.utils.data.get_worker_info()
    served += 1
    if info is not None and info.id == 1 and served == 40:
        os.kill(os.getpid(), signal.SIGKILL)
    return original(self, index)


datasets.SyntheticImages.__getitem__ = dying_getitem  # type: ignore[method-assign]
sys.exit(
    main(
        [
            "run",
            "--out",
            sys.argv[1],
            "--device",
            "cpu",
            "--modes",
            "pageable",
            "--batches",
            "200",
            "--skip",
            "2",
            "--batch-size",
            "4",
            "--num-workers",
            "2",
            "--dataset-size",
            "4096",
            "--cpu-work-ms",
            "0.5",
            "--no-plots",
        ]
    )
)
