"""The transfer modes people argue about, as data: what each does to the loader and to the copy.

Plain data (no torch): the CLI, the nsys importer and the capture all name modes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from profiler.errors import UsageError

Mode = Literal["pageable", "pageable_nb", "pinned", "pinned_nb", "staged", "prefetch"]
MODES: tuple[Mode, ...] = get_args(Mode)


@dataclass(frozen=True)
class ModeSpec:
    """How one mode moves a batch.

    pin_memory: the DataLoader pins batches (pin thread, or main thread with no workers).
    non_blocking: the copy is issued with ``non_blocking=True``.
    side_stream: the copy runs on a dedicated copy stream; the compute stream waits on its event.
    staged: the main thread stages through pinprof's reused pinned buffers first.
    prefetch: the loop (``TransferProfiler.device_batches``) fetches batch n+1 and issues its copy
        before step n's compute, and the compute stream waits for that copy only when batch n+1 is
        consumed: the copy runs under step n's compute instead of on an idle GPU after it.
    """

    name: Mode
    pin_memory: bool
    non_blocking: bool
    side_stream: bool
    staged: bool
    description: str
    prefetch: bool = False


SPECS: dict[Mode, ModeSpec] = {
    "pageable": ModeSpec(
        "pageable", False, False, False, False, "pageable batch, blocking .to(): the driver stages it, hidden"
    ),
    "pageable_nb": ModeSpec(
        "pageable_nb",
        False,
        True,
        False,
        False,
        "pageable batch, .to(non_blocking=True): the driver still stages and blocks",
    ),
    "pinned": ModeSpec(
        "pinned",
        True,
        False,
        False,
        False,
        "pin_memory=True, blocking .to(): the DMA is fast but the loop waits for it",
    ),
    "pinned_nb": ModeSpec(
        "pinned_nb",
        True,
        True,
        True,
        False,
        "pin_memory=True, non_blocking copy on a side stream, overlapped with CPU work",
    ),
    "staged": ModeSpec(
        "staged",
        False,
        True,
        True,
        True,
        "pageable batch, chunked copy into reused pinned buffers overlapped with the DMA",
    ),
    "prefetch": ModeSpec(
        "prefetch",
        True,
        True,
        True,
        False,
        "pin_memory=True, the next batch fetched and copied on a side stream before this step's compute",
        prefetch=True,
    ),
}


def parse_mode(value: str) -> Mode:
    """Validate a mode name, with an error that lists the valid ones."""
    if value not in SPECS:
        raise UsageError(f"unknown mode {value!r}; choose from {', '.join(MODES)}")
    return value  # type: ignore[return-value]
