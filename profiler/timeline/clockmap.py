"""The map from GPU event times onto the host clock (built by ``profiler.capture.cuda.anchor``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

# One elapsed time or a column of them.
Times = TypeVar("Times", float, npt.NDArray[np.float64])


@dataclass(frozen=True)
class ClockMap:
    """Maps an event's elapsed ms since the first anchor onto the host clock, drift corrected:
    ``host = origin_host_ms + elapsed * scale``."""

    origin_host_ms: float
    scale: float = 1.0

    def host_ms(self, elapsed_since_first_ms: Times) -> Times:
        """Host ms for one elapsed value or an array of them (NaN stays NaN)."""
        return self.origin_host_ms + elapsed_since_first_ms * self.scale
