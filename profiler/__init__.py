"""pinprof: per-batch profiler for the host-to-device path of PyTorch input pipelines."""
from ._version import __version__
from .batch_tree import BatchTypeError
from .hazards import PinprofHazardWarning
from .modes import MODES, Mode
from .recorder import PinprofWarning, TransferProfiler
from .staging import PinnedStager, to_device_staged
from .timeline import COLUMNS

__all__ = ["COLUMNS", "MODES", "BatchTypeError", "Mode", "PinnedStager", "PinprofHazardWarning", "PinprofWarning",
           "TransferProfiler", "__version__", "to_device_staged"]
