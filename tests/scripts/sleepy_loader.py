"""A loop whose dataset waits 4 ms an item (as a slow disk or decode would), with no workers: more
workers make it faster, which ``pinprof tune`` must find (tests/test_tune.py). Nothing of pinprof in it.

    python tests/scripts/sleepy_loader.py [--epochs 2] [--one-loader] [--item-ms 4] [--items 400] [--optimizer]

``--one-loader``: one DataLoader iterated every epoch (the default builds one an epoch); ``--item-ms``:
the wait of an item; ``--items``: the dataset's length; ``--optimizer``: ``torch.optim.SGD`` steps
the weights (the default updates them by hand, as tutorials write SGD: an optimizer's first param
group imports ``torch._dynamo``, 2.5 s of CPU a process on the 2-core CI machine, which the tests that
run this script many times, tune's trials and compare's runs, do not need).
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Sleepy(Dataset[torch.Tensor]):
    def __init__(self, item_ms: float = 4.0, items: int = 400) -> None:
        self.item_s, self.items = item_ms / 1e3, items

    def __len__(self) -> int:
        return self.items

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.item_s)
        return torch.rand(8, generator=torch.Generator().manual_seed(i))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--one-loader", action="store_true")
    p.add_argument("--item-ms", type=float, default=4.0)
    p.add_argument("--items", type=int, default=400)
    p.add_argument("--optimizer", action="store_true")
    args = p.parse_args()
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1) if args.optimizer else None
    data = Sleepy(args.item_ms, args.items)
    loader = DataLoader(data, batch_size=4, num_workers=0)
    for _ in range(args.epochs):
        for x in loader if args.one_loader else DataLoader(data, batch_size=4, num_workers=0):
            model(x.to("cpu")).sum().backward()
            if opt is not None:
                opt.step()
                opt.zero_grad()
                continue
            with torch.no_grad():
                for w in model.parameters():
                    if w.grad is not None:
                        w.sub_(0.1 * w.grad)
                        w.grad = None
    print("done")


if __name__ == "__main__":
    main()
