"""pinprof: per-batch profiler for the host-to-device path of PyTorch input pipelines.

The package follows the data's one-way flow; each subpackage's docstring says what it holds and what
it may import (``tests/test_layers.py`` checks it):

    capture/    the loop wrapper that measures (torch, CUDA events, NVTX) -> per-batch records
    timeline/   records -> the typed per-batch DataFrame (schema, build, split)
    analysis/   DataFrame -> statistics and diagnoses
    render/     -> Markdown, JSON, plots, Chrome trace
    report/     report folders: the files, metadata, ranks merged
    nsys/       Nsight Systems: run, import, compare
    drivers/    one way in each: profile, tune, the scenario matrix (run), bandwidth
    bench/      pinprof measuring itself (scripts and tests only)
    cli/        ``pinprof VERB``

Foundation modules any layer may use: ``errors``, ``settings``, ``modes``, ``units``, ``atomic``,
``names``.

The public names below load on first use, so ``import profiler`` (and the CLI's reading verbs) do not
import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from profiler._version import __version__ as __version__

_PUBLIC = {
    "TransferProfiler": "profiler.drivers.library",
    "PinprofCallback": "profiler.integrations.lightning",
    "PinnedStager": "profiler.capture.staging",
    "prefetch": "profiler.capture.device_prefetch",
    "to_device_staged": "profiler.capture.staging",
    "MODES": "profiler.modes",
    "Mode": "profiler.modes",
    "COLUMNS": "profiler.timeline.schema",
    "BatchTypeError": "profiler.errors",
    "PinprofError": "profiler.errors",
    "PinprofWarning": "profiler.errors",
    "PinprofHazardWarning": "profiler.errors",
}
__all__ = sorted([*_PUBLIC, "__version__"])

if TYPE_CHECKING:  # the names __getattr__ loads, for type checkers
    from profiler.capture.device_prefetch import prefetch
    from profiler.capture.staging import PinnedStager, to_device_staged
    from profiler.drivers.library import TransferProfiler
    from profiler.errors import BatchTypeError, PinprofError, PinprofHazardWarning, PinprofWarning
    from profiler.integrations.lightning import PinprofCallback
    from profiler.modes import MODES, Mode
    from profiler.timeline.schema import COLUMNS


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'profiler' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value
