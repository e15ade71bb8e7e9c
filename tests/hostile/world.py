"""Prints, as JSON, what a script sees of the world it runs in; then runs a DataLoader. Run bare and
under ``pinprof profile``, both must print the same. Args: [spawn]."""

import json
import os
import sys

import torch
from torch.utils.data import DataLoader


def seen() -> dict:
    here = os.path.dirname(__file__)
    os.chdir("/")  # a script that changes folder, then opens a file next to it
    with open(os.path.join(here, "world_cfg.txt")) as fh:
        cfg = fh.read().strip()
    g = globals()
    return {
        "path0": sys.path[0],
        "file": __file__,
        "abs": os.path.isabs(__file__),
        "loader": type(g.get("__loader__")).__name__,
        "package": g.get("__package__"),
        "spec": None if g.get("__spec__") is None else g["__spec__"].name,
        "builtins": type(g["__builtins__"]).__name__,
        "name": __name__,
        "argv": sys.argv[1:],
        "main_file": os.path.basename(getattr(sys.modules["__main__"], "__file__", "")),
        "cfg": cfg,
    }


class Square(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor([i * i])


if __name__ == "__main__":
    out = seen()
    ctx = sys.argv[1] if len(sys.argv) > 1 else None
    loader = DataLoader(Square(), batch_size=2, num_workers=1 if ctx else 0, multiprocessing_context=ctx)
    out["batches"] = [b.tolist() for b in loader]
    with open(os.path.join(os.path.dirname(__file__), "world_out.json"), "w") as fh:  # a file it writes
        json.dump(out, fh, sort_keys=True)
    print(json.dumps(out, sort_keys=True))
