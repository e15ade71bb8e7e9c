"""No GPU: the batch's step is timed on the host's clock, from its last copy's return to its row's end."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiler.capture.clocks.gpu_clock import GpuClock, Timed

if TYPE_CHECKING:
    from profiler.capture.in_flight import Mark


class HostClock(GpuClock):
    """A batch on a CPU device."""

    name = "host"

    def open(self, prof: Timed, rec: dict[str, Any]) -> None:
        rec["comp_s"] = rec["fetch_e"]  # moved to the batch's last copy, if it makes copies

    def noted(
        self, prof: Any, rec: dict[str, Any], call_s_ns: int, call_e_ns: int, nbytes: int, alt_bytes: int | None
    ) -> None:
        if "_stepped" not in rec:  # a copy after the batch's step leaves the step alone
            rec["comp_s"] = call_e_ns / 1e6  # the step starts when the batch's last copy has returned

    def start_step(self, prof: Timed, rec: dict[str, Any], now: float) -> None:
        rec["comp_s"] = now

    def end_step(
        self, prof: Timed, rec: dict[str, Any], end: float, tent: Mark | None, at_tent: bool, bump: Mark | None
    ) -> None:
        if bump is not None:
            rec["comp_s"] = max(rec["comp_s"], bump.host_ms)
        rec["comp_e"] = end
        rec["comp_sum"] = rec["comp_e"] - rec["comp_s"]
