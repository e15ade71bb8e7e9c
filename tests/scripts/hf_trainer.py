"""A Hugging Face ``Trainer`` run on a tiny model of its own (no download), each batch's forward
sleeping k x ``--unit-ms`` with k = b % 4 + 1 for the b-th batch fetched, whatever the sampler's
order. Nothing of pinprof in it; needs ``transformers`` (among the test extras).

With ``--accumulate N`` the Trainer fetches all N batches of a window before it trains on any
(tests/test_in_flight.py checks pinprof's rows of it).

    python tests/scripts/hf_trainer.py [--accumulate 1] [--batches 8] [--unit-ms 40]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel, Trainer, TrainingArguments


class TinyConfig(PretrainedConfig):
    model_type = "pinprof-tiny"


class Tiny(PreTrainedModel):
    config_class = TinyConfig

    def __init__(self, config: TinyConfig, unit_s: float) -> None:
        super().__init__(config)
        self.lin = nn.Linear(4, 1)
        self.unit_s = unit_s
        self.post_init()

    def forward(self, x: torch.Tensor, k: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        time.sleep(float(k[0]) * self.unit_s)
        out = self.lin(x).squeeze(-1)
        return {"loss": ((out - labels) ** 2).mean(), "logits": out}


class Items(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    """Items in the order they are fetched: the b-th batch of 4 carries k = b % 4 + 1."""

    def __init__(self, n: int) -> None:
        self.n, self.fetched = n, 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        k = (self.fetched // 4) % 4 + 1
        self.fetched += 1
        return {"x": torch.rand(4), "k": torch.tensor(float(k)), "labels": torch.tensor(0.0)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--accumulate", type=int, default=1, help="gradient_accumulation_steps")
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--unit-ms", type=float, default=40.0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="hf-trainer-") as out:  # the Trainer's folder goes with the run
        fit(args, out)


def fit(args: argparse.Namespace, out: str) -> None:
    """The Trainer's training on ``Items``, its output folder ``out``."""
    train = TrainingArguments(
        output_dir=out,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=args.accumulate,
        max_steps=args.batches // args.accumulate,
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
        save_strategy="no",
        disable_tqdm=True,
    )
    model = Tiny(TinyConfig(), args.unit_ms / 1e3)
    Trainer(model=model, args=train, train_dataset=Items(16 * args.batches)).train()


if __name__ == "__main__":
    main()
