"""Byte sizes as people write them (``64K``, ``12.5M``, ``1G``) and as tables show them."""

from __future__ import annotations

from profiler.errors import UsageError

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
_UNITS = {"K": KiB, "M": MiB, "G": GiB}


def parse_size(text: str) -> int:
    """``64K``, ``12.5M``, ``1G`` (binary units; ``KiB``/``MB`` spellings too) or plain bytes."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    try:
        value = float(t[:-1]) * _UNITS[t[-1]] if t and t[-1] in _UNITS else float(t)
    except ValueError:
        raise UsageError(f"size {text!r} is not a size like 64K, 12.5M or 1G") from None
    if not 1 <= value <= 64 * GiB:
        raise UsageError(f"size {text!r} must be between 1 byte and 64G")
    return int(value)


def format_size(nbytes: float) -> str:
    """``12.5 MiB`` style, for tables and axes."""
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= scale:
            v = nbytes / scale
            return f"{v:g} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{int(nbytes)} B"
