"""Names that reach pinprof's outputs (scenarios, runs, what interrupted a run), made safe where they enter.

A name comes from a Dataset's class, a folder, an exception or a file written elsewhere. A newline
in one started a new Markdown heading in ``diagnosis.md``; ``<script>`` would run in an HTML report;
a name of a megabyte held a plot for minutes. So each is cleaned once, where it enters: control and
invisible format characters are written as Python escapes (``\\n``, ``\\x1b``), and the name is cut
to ``LIMIT`` characters. The renderers escape what their own format needs (``profiler.render``); CSV
cells that a spreadsheet would run as a formula are neutralised by the CSV writer
(``profiler.atomic.csv_text``). Imports only the standard library.
"""

from __future__ import annotations

import unicodedata

LIMIT = 200
_UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}


def clean(text: object, limit: int = LIMIT) -> str:
    """``text`` as a printable one-line name of at most ``limit`` characters (see the module docstring)."""
    raw = str(text)
    if raw.isprintable() and len(raw) <= limit:  # the common case, at C speed
        return raw
    out = []
    for ch in raw[: limit * 4]:
        if ch == " " or unicodedata.category(ch) not in _UNSAFE:
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    name = "".join(out)
    return name if len(name) <= limit else name[: limit - 3] + "..."
