"""The two benchmarks people quote about pin_memory (README, "Diagnosis"), as fixed ``pinprof run`` arguments.

naive:  batch 64, no workers, blocking .cuda(), pin_memory off (``pageable``) and on (``pinned``).
better: batch 1024, 6 workers, non_blocking=pin_memory (``pageable`` vs ``pinned_nb``), 100 ms of CPU
        work per batch.
Both run one epoch of the CIFAR-10-shaped synthetic set unless --batches or --epochs is given.
"""

from __future__ import annotations

from profiler.cli import main

QUOTED: dict[str, list[str]] = {
    "naive": [
        "--modes",
        "pageable,pinned",
        "--batch-size",
        "64",
        "--num-workers",
        "0",
        "--cpu-work-ms",
        "0",
        "--compute-ms",
        "0",
        "--skip",
        "5",
    ],
    "better": [
        "--modes",
        "pageable,pinned_nb",
        "--batch-size",
        "1024",
        "--num-workers",
        "6",
        "--cpu-work-ms",
        "100",
        "--compute-ms",
        "0",
        "--skip",
        "2",
    ],
}


def run_quoted(name: str, argv: list[str]) -> int:
    """``pinprof run`` with the quoted scenario's arguments (plus ``argv``), then its diagnosis."""
    extra = list(argv)
    if "--batches" not in extra and "--epochs" not in extra:
        extra += ["--epochs", "1"]
    if "--out" not in extra:
        extra += ["--out", f"reports/{name}"]
    code = main(["run", *QUOTED[name], *extra])
    if code == 0:
        code = main(["diagnose", extra[extra.index("--out") + 1]])
    return code
