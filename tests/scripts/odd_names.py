"""A loop over a Dataset whose class name holds Markdown link and image syntax and HTML, ending in an
exception whose class name holds ``<&>`` (tests/test_odd_inputs.py: both reach the report's files)."""

import torch
from torch.utils.data import DataLoader, Dataset

Named = type(
    "[click](http://evil.example/x) ![img](http://evil.example/i.png) <b>",
    (Dataset,),
    {"__len__": lambda self: 64, "__getitem__": lambda self, i: torch.rand(8)},
)
Failed = type("Boom<&>", (Exception,), {})
for x in DataLoader(Named(), batch_size=4):
    x.to("cpu")
raise Failed("the end")
