"""Timeline: per-batch records -> the typed per-batch DataFrame.

Holds the columns, units and dtypes (``schema``), the build from raw records (``build``), the clock
map that puts GPU times on the host clock (``clockmap``), the calibrated pinned rate
(``calibration``) and the split of a pageable copy into DMA and hidden staging (``split``).

May import: numpy, pandas and the foundation modules. Never torch or any other subpackage.
"""
