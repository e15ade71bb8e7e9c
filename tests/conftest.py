from __future__ import annotations

import pytest
import torch

CUDA = torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="needs a CUDA device (run scripts/gpu_check.sh on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords and not CUDA:
            item.add_marker(skip)
