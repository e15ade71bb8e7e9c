"""`pinprof run` end to end on the CPU, and its usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from profiler.cli import main
from profiler.report.files import read_timeline

SMALL = [
    "--batches",
    "4",
    "--skip",
    "1",
    "--batch-size",
    "16",
    "--num-workers",
    "0",
    "--dataset-size",
    "256",
    "--cpu-work-ms",
    "0.5",
]


def test_run_writes_a_complete_report_with_gpu_columns_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rep"
    assert main(["run", "--out", str(out), *SMALL, "--device", "cpu", "--modes", "pageable,staged"]) == 0
    printed = capsys.readouterr().out
    assert "no CUDA device" in printed or "GPU phases" in printed
    assert {"timeline.csv", "summary.csv", "summary.md", "meta.json"} <= {p.name for p in out.iterdir()}
    tl = read_timeline(out)
    assert len(tl) == 2 * 5 and set(tl["mode"]) == {"pageable", "staged"}
    assert tl.h2d_ms.isna().all() and tl.compute_ms.isna().all()
    assert tl[tl["mode"] == "staged"].stage_ms.notna().all()
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.batches) == [4, 4] and (summary.fetch_ms_p50 > 0).all()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["partial"] is False and meta["device"] == "cpu" and "pinprof run" in meta["command"]
    # the terminal: a table of the columns measured (no GPU column on a CPU), then the verdict in brief
    header = next(line for line in printed.splitlines() if line.startswith("scenario "))
    assert "fetch" in header and "h2d" not in header and "GB/s" not in header
    assert "verdict:" in printed and "report.html" in printed
    assert max(len(line) for line in printed.splitlines() if not line.startswith("pinprof:")) <= 100


def test_existing_report_folder_is_not_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rep"
    out.mkdir()
    (out / "timeline.csv").write_text("precious")
    assert main(["run", "--out", str(out), *SMALL, "--device", "cpu"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (out / "timeline.csv").read_text() == "precious"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--modes", "turbo"], "unknown mode"),
        (["--batch-size", "0"], "--batch-size '0' must be > 0"),
        (["--batch-size", "-64"], "must be > 0"),
        (["--batch-size", "abc"], "is not an integer"),
        (["--num-workers", "-1"], "must be >= 0"),
        (["--cpu-work-ms", "x"], "is not a number"),
        (["--batches", "3", "--epochs", "1"], "not allowed with"),
        (["--dataset", "cifar10", "--data-root", "/nonexistent/path"], "is not a folder"),
        (["--dataset", "cifar10"], "needs --data-root"),
        (["--device", "cuda:3"], "needs CUDA|does not exist"),
    ],
)
def test_bad_arguments_exit_2_with_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code: int | str | None
    try:
        code = main(["run", "--out", str(tmp_path / "o"), *args])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert pytest.importorskip("re").search(message, err), err
    assert "Traceback" not in err


def test_cifar10_root_without_the_data_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--out", str(tmp_path / "o"), "--dataset", "cifar10", "--data-root", str(tmp_path)]) == 2
    assert "holds no CIFAR-10" in capsys.readouterr().err


def test_unwritable_out_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["run", "--out", str(blocker / "sub"), *SMALL, "--device", "cpu"]) == 2
    assert "not writable" in capsys.readouterr().err


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "profiler", "--version"], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.startswith("pinprof ")


def test_batches_beyond_one_epoch_restart_the_loader(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    args = ["run", "--out", str(out), "--device", "cpu", "--modes", "pageable", "--batch-size", "16",
            "--dataset-size", "64", "--num-workers", "0", "--batches", "10", "--skip", "1",
            "--cpu-work-ms", "0", "--no-plots", "--no-calibrate"]  # fmt: skip
    assert main(args) == 0
    tl = read_timeline(out)
    assert len(tl) == 11 and list(tl.batch) == list(range(11))  # 4 batches per epoch: three epochs, cut at 11


def test_a_cpu_run_says_compute_is_host_timed(tmp_path: Path) -> None:
    from profiler.analysis.diagnose import diagnose
    from profiler.render.markdown import diagnosis_text

    tl = read_timeline(Path(__file__).parent / "data" / "h200_default")
    tl = tl.assign(device="cpu", h2d_ms=float("nan"), compute_ms=tl.batch_ms * 0.8)
    text = diagnosis_text(diagnose(tl))
    assert "compute (host clock, no GPU) takes" in text and "GPU compute" not in text


@pytest.mark.parametrize(("size", "side"), [(3, 32), (2, 17)])
def test_the_synthetic_items_are_what_torchvisions_to_tensor_makes_of_them(size: int, side: int) -> None:
    """``pinprof run``'s default data decodes each item as torchvision's CIFAR10 does, without importing
    torchvision (``profiler.drivers.datasets.to_tensor``): the same values, dtype, shape and layout."""
    from PIL import Image
    from torchvision import transforms

    from profiler.drivers.datasets import SyntheticImages

    ds = SyntheticImages(size=size, image_size=side)
    assert ds.data is not None
    for i in range(size):
        item, label = ds[i]
        want = transforms.ToTensor()(Image.fromarray(ds.data[i]))
        assert item.dtype == want.dtype and item.shape == want.shape == (3, side, side)
        assert item.stride() == want.stride() and bool((item == want).all()) and label == ds.targets[i]


def test_pinprof_run_does_not_import_torchvision_for_its_default_data() -> None:
    """torchvision's import brings its ops and ``torch._dynamo``: seconds of every ``pinprof run``'s start."""
    code = "import sys; import profiler.drivers.runner; print('torchvision' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr[-2000:]
