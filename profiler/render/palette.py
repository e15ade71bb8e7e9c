"""One colour per phase, shared by the plots, the Chrome trace and the NVTX ranges (so a user sees the
same colours in Nsight Systems as in pinprof's pictures)."""

from __future__ import annotations

COLORS: dict[str, str] = {
    "fetch": "#1f77b4",
    "pin": "#9467bd",
    "stage": "#ff7f0e",
    "layout": "#bcbd22",
    "h2d": "#d62728",
    "hidden_stage": "#f4a582",
    "dma": "#d62728",
    "cpu_work": "#2ca02c",
    "compute": "#17becf",
    "wait": "#8c564b",
    "other": "#c7c7c7",
    "batch": "#9e9e9e",
}


def argb(phase: str) -> int:
    """The phase's colour as the opaque ARGB integer NVTX takes."""
    return 0xFF000000 | int(COLORS[phase].lstrip("#"), 16)
