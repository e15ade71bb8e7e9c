from __future__ import annotations

import dataclasses
from collections import namedtuple

import pytest
import torch

from profiler.capture.batch_tree import batch_bytes, batch_memory_kind, iter_tensors, map_tensors, require_tensors
from profiler.errors import BatchTypeError


@dataclasses.dataclass
class Sample:
    image: torch.Tensor
    meta: dict
    name: str = "x"


Pair = namedtuple("Pair", "a b")


def test_bytes_count_every_tensor_in_nested_containers() -> None:
    batch = {
        "img": torch.zeros(4, 3, dtype=torch.float32),  # 48
        "pair": Pair(torch.zeros(2, dtype=torch.int64), [torch.zeros(5, dtype=torch.uint8)]),  # 16 + 5
        "sample": Sample(torch.zeros(3, dtype=torch.float16), {"k": (torch.zeros(1, dtype=torch.float64),)}),  # 6 + 8
        "label": 3,
        "text": "hello",
    }
    assert batch_bytes(batch) == 48 + 16 + 5 + 6 + 8
    assert len(list(iter_tensors(batch))) == 5


def test_a_view_counts_only_its_elements() -> None:
    base = torch.arange(100, dtype=torch.float32).reshape(10, 10)
    view = base[:, 1]  # non-contiguous, 10 elements of a 400-byte storage
    assert not view.is_contiguous()
    assert batch_bytes(view) == 40


def test_map_rebuilds_the_same_structure() -> None:
    batch = [Pair(torch.ones(2), {"x": torch.ones(1)}), Sample(torch.ones(3), {"m": torch.ones(2)}, "keep"), 7]
    out = map_tensors(batch, lambda t: t * 2)
    assert isinstance(out[0], Pair) and isinstance(out[1], Sample) and out[1].name == "keep" and out[2] == 7
    assert torch.equal(out[0].a, torch.full((2,), 2.0)) and torch.equal(out[1].meta["m"], torch.full((2,), 2.0))


def test_memory_kind_of_cpu_tensors_is_pageable_here() -> None:
    assert batch_memory_kind([torch.ones(3), torch.ones(2)]) == "pageable"


@pytest.mark.parametrize("batch", [3, "text", {"a": [1, 2]}, None])
def test_a_batch_without_tensors_gets_an_error_naming_its_type(batch: object) -> None:
    with pytest.raises(BatchTypeError, match=type(batch).__name__):
        require_tensors(batch)


@dataclasses.dataclass
class WithDerived:
    a: torch.Tensor
    b: torch.Tensor
    derived: torch.Tensor = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.derived = self.a + 1


def test_the_two_walks_visit_the_same_tensors_in_the_same_order() -> None:
    batch = [WithDerived(torch.zeros(2), torch.ones(3)), {"c": torch.full((4,), 2.0)}]
    visited: list[torch.Tensor] = []

    def visit(t: torch.Tensor) -> torch.Tensor:
        visited.append(t)
        return t

    map_tensors(batch, visit)
    assert [id(t) for t in iter_tensors(batch)] == [id(t) for t in visited]
    # the recorder hands out its copies in iter_tensors order: every tensor must land in its own place
    copies = iter([t.clone() * 10 for t in iter_tensors(batch)])
    out = map_tensors(batch, lambda t: next(copies))
    assert torch.equal(out[0].b, torch.full((3,), 10.0)) and torch.equal(out[1]["c"], torch.full((4,), 20.0))
    assert torch.equal(out[0].derived, torch.ones(2))  # recomputed by __post_init__ from the new a


def test_storage_of_traces_views_to_their_tensor_and_skips_what_has_no_plain_storage() -> None:
    from profiler.capture.batch_tree import owners, storage_of

    x = torch.rand(4, 6)
    assert storage_of(x[:, 2]) == storage_of(x[1:]) == storage_of(x) is not None
    assert storage_of(x.clone()) != storage_of(x)
    assert storage_of(x.to_sparse()) is None  # untyped_storage() raises on it
    assert set(owners({"x": x, "s": x.to_sparse(), "n": 3})) == {storage_of(x)}
