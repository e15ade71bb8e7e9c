"""Integrations: what pinprof adds to a framework's own way of running a loop, one module a framework
(``lightning``: the ``PinprofCallback`` for a Lightning ``Trainer``, the same hooks and report as
``pinprof profile``).

May import: torch, the framework it is for, ``capture``, ``timeline``, ``report`` and ``drivers``.
"""
