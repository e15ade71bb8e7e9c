"""``pinprof profile`` on unmodified scripts (tests/scripts/): a plain loop, two loaders with an x/y
two-copy loop, a Lightning ``Trainer.fit`` (under ``pinprof profile`` and with the callback), a
two-rank gloo torchrun job; a script that raises; an internal failure of pinprof.

On a CPU machine a batch's ``.to(device)`` goes to the CPU: it is counted as ``to_device`` counts it
there (bytes, copies, host-timed), with no CUDA events.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import sigint_as_at_a_terminal, wait_for_journal

from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession
from profiler.report.files import read_timeline

HERE = Path(__file__).parent
SCRIPTS = HERE / "scripts"
IMAGE = 3 * 8 * 8 * 4  # bytes of one float32 3x8x8 image


def profile(out: Path, *script: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--", "python", *script]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=HERE.parent)


def meta_of(folder: Path) -> dict:
    return json.loads((folder / "meta.json").read_text())


def test_a_plain_training_script_gets_one_row_per_batch(tmp_path: Path) -> None:
    run = profile(tmp_path / "r", str(SCRIPTS / "plain_train.py"), "--epochs", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "trained 14 steps" in run.stdout  # the script ran as it does alone
    tl = read_timeline(tmp_path / "r")
    assert len(tl) == 14 and list(tl.batch) == list(range(14))  # 100 samples / 16, twice
    sizes = [16] * 6 + [4]
    assert list(tl.bytes) == [n * (IMAGE + 8) for n in sizes * 2]  # images + int64 labels
    assert (tl.copies == 2).all()
    assert tl.fetch_ms.notna().all() and (tl.fetch_ms > 0).all()
    assert (tl.scenario == "TensorDataset/bs16/w2").all() and (tl.num_workers == 2).all()
    assert (tmp_path / "r" / "diagnosis.md").read_text().count("Headline") == 1
    assert meta_of(tmp_path / "r")["partial"] is False
    loaders = meta_of(tmp_path / "r")["loaders"]  # each batch copied and stepped before the next is fetched
    assert loaders["TensorDataset/bs16/w2"]["pattern"] == "plain"
    # What pinprof cost the loop, in every report a person reads: the steady rows' mean pinprof_ms, and
    # its share of their mean batch; no CUPTI kernel count on a CPU machine
    steady = tl[~tl.warmup]
    own = steady.pinprof_ms.mean()
    said = f"pinprof's own time: {own:.3f} ms a batch on the loop's thread ({100 * own / steady.batch_ms.mean():.1f}%)"
    for name in ("summary.md", "diagnosis.md", "report.html"):
        text = html.unescape((tmp_path / "r" / name).read_text())
        assert text.count(said) == 1 and "kernel launches" not in text, (name, said)
    assert said in " ".join(run.stderr.split())  # the terminal's brief goes to stderr, beside the script's own output


def test_a_script_that_raises_still_gets_its_report(tmp_path: Path) -> None:
    run = profile(tmp_path / "r", str(SCRIPTS / "plain_train.py"), "--raise-at", "3")
    assert run.returncode == 1
    assert "ValueError: the script's own error at step 3" in run.stderr  # shown as python shows it
    tl = read_timeline(tmp_path / "r")
    assert len(tl) == 4 and (tl.bytes == 16 * (IMAGE + 8)).all()  # steps 0-3 were iterated
    info = meta_of(tmp_path / "r")
    assert info["partial"] is True and info["interrupted_by"] == "ValueError" and info["exit_status"] == 1
    assert "step 3" in info["error"]


def test_two_loaders_and_two_copies_per_batch(tmp_path: Path) -> None:
    run = profile(tmp_path / "r", str(SCRIPTS / "two_loaders.py"))
    assert run.returncode == 0, run.stderr[-3000:]
    tl = read_timeline(tmp_path / "r")
    train, val = tl[tl.scenario == "Pairs/bs8/w1"], tl[tl.scenario == "Held/bs16/w0"]
    assert len(train) == 5 and len(val) == 2 and len(tl) == 7
    assert (train.bytes == 8 * (3 * 16 * 16 * 4 + 4 * 4)).all() and (train.copies == 2).all()
    assert list(val.bytes) == [n * (3 * 8 * 8 * 4 + 4 * 4) for n in (16, 8)]
    assert tl.fetch_ms.notna().all()
    assert {k: v["pattern"] for k, v in meta_of(tmp_path / "r")["loaders"].items()} == {
        "Pairs/bs8/w1": "plain",
        "Held/bs16/w0": "plain",
    }


@pytest.mark.parametrize("how", ["profile", "callback"])
def test_a_lightning_fit(tmp_path: Path, how: str) -> None:
    pytest.importorskip("lightning")
    out = tmp_path / "r"
    if how == "profile":
        run = profile(out, str(SCRIPTS / "lightning_fit.py"), "--steps", "6")
    else:
        cmd = [sys.executable, str(SCRIPTS / "lightning_fit.py"), "--steps", "6", "--callback-out", str(out)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=HERE.parent)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "fit 6 steps" in run.stdout
    tl = read_timeline(out)
    assert len(tl) == 6 and (tl.bytes == 8 * (IMAGE + 8)).all() and (tl.copies == 2).all()
    assert tl.fetch_ms.notna().all()
    assert meta_of(out)["loaders"]["TensorDataset/bs8/w0"]["pattern"] == "plain"  # a sized loader: no fetch ahead


def test_a_lightning_fetcher_one_batch_ahead_is_found_and_said(tmp_path: Path) -> None:
    """On a dataset of no length Lightning fetches batch n+1 before it copies batch n: each row is
    still one batch (tests/test_in_flight.py checks whose step it holds), and the report says what
    loop it saw. The batch fetched ahead of the last step is never copied: it gets no row, and
    meta.json counts it."""
    pytest.importorskip("lightning")
    out = tmp_path / "r"
    run = profile(out, str(SCRIPTS / "lightning_fit.py"), "--steps", "6", "--iterable")
    assert run.returncode == 0, run.stderr[-3000:]
    tl = read_timeline(out)
    assert list(tl.copies) == [2] * 6  # 7 fetches for 6 steps: the 7th is no training batch
    assert meta_of(out)["loaders"]["Stream/bs8/w0"]["pattern"] == "fetch-ahead"
    assert meta_of(out)["loaders"]["Stream/bs8/w0"]["fetched_unused"] == 1
    assert "Stream/bs8/w0: the loop fetches each batch before the step of the one before" in run.stderr
    assert run.stdout == "fit 6 steps\n"  # the program's output alone: pinprof's lines go to stderr


def test_a_lightning_fit_that_raises_with_the_callback(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    out = tmp_path / "r"
    cmd = [sys.executable, str(SCRIPTS / "lightning_fit.py"), "--raise-at", "3", "--callback-out", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=HERE.parent)
    assert run.returncode != 0 and "the model's own error at batch 3" in run.stderr
    tl = read_timeline(out)
    assert len(tl) == 4 and (tl.bytes == 8 * (IMAGE + 8)).all()
    assert meta_of(out)["partial"] is True and meta_of(out)["interrupted_by"] == "ValueError"


@pytest.mark.parametrize("linger", [0.0, 3.0])
def test_a_two_rank_gloo_torchrun_job(tmp_path: Path, linger: float) -> None:
    """Rank 0 merges the ranks' folders once each has written its report. ``linger``: rank 1 ends
    seconds after rank 0 (a checkpoint saved at the end); its folder holds the meta.json of a running
    report and the rows appended so far until then, and the merge must wait for its final one."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "r"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(port),
        "-m",
        "profiler",
        "profile",
        "--out",
        str(out),
        "--no-plots",
        "--",
        "python",
        str(SCRIPTS / "ddp_train.py"),
        "--linger",
        str(linger),
    ]
    # torchrun's agent leaves a torchelastic_* folder in the temporary directory: the test's own holds it
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=HERE.parent, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    for k in (0, 1):
        part = read_timeline(out / f"rank{k}")
        assert len(part) == 6 and (part["rank"] == k).all()  # 96 samples, 2 ranks, batches of 8
    merged = read_timeline(out)
    assert sorted(merged["rank"].unique()) == [0, 1] and len(merged) == 12
    assert (merged.bytes == 8 * (IMAGE + 8)).all() and merged.fetch_ms.notna().all()
    assert (merged.world_size == 2).all()
    assert meta_of(out)["partial"] is False and "status" not in meta_of(out)  # no rank's running meta.json


def test_under_torchrun_without_out_is_refused_before_the_script_runs(tmp_path: Path) -> None:
    env = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "profiler", "profile", "--", "python", str(SCRIPTS / "plain_train.py")]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert run.returncode == 2 and "give --out DIR" in run.stderr and "trained" not in run.stdout


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ([], "give the program after --"),
        (["python", "nope.py"], "'nope.py' is not a file"),
        (["python", "-m"], "-m needs"),
    ],
)
def test_bad_commands_are_one_line_errors(tmp_path: Path, command: list[str], says: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "profiler", "profile", "--out", str(tmp_path / "r"), "--", *command],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HERE.parent,
    )
    assert run.returncode == 2 and says in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "timeline.csv").exists()


def _loop(n: int) -> list[torch.Tensor]:
    data = torch.arange(40.0).reshape(20, 2)  # a tensor is a map-style dataset of its rows
    loader: torch.utils.data.DataLoader[torch.Tensor] = torch.utils.data.DataLoader(data, batch_size=4)  # type: ignore[arg-type]
    seen = []
    for batch in loader:
        seen.append(batch.to("cpu") + 0)
    return seen[:n]


def test_an_internal_failure_never_breaks_the_program(capsys: pytest.CaptureFixture[str]) -> None:
    session = AutoSession("cpu")
    calls = {"n": 0}
    original = session.arrived

    def broken(*args: object) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("simulated pinprof bug")
        original(*args)  # type: ignore[arg-type]

    session.arrived = broken  # type: ignore[method-assign,assignment]
    auto_hooks.start(session)
    try:
        seen = _loop(5)
    finally:
        auto_hooks.stop()
    assert [t.tolist() for t in seen] == [[[8 * i + 2 * j, 8 * i + 2 * j + 1] for j in range(4)] for i in range(5)]
    err = capsys.readouterr().err
    assert err.count("pinprof: profiling stopped after an internal error (RuntimeError: simulated pinprof bug)") == 1
    tl = session.close()
    assert len(tl) == 2  # the two batches before the failure are kept; none after it
    assert auto_hooks.failure == "RuntimeError: simulated pinprof bug"


def test_hooks_are_removed_when_profiling_ends() -> None:
    before = (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.copy_, torch.Tensor.pin_memory)
    next_before = torch.utils.data.dataloader._BaseDataLoaderIter.__next__
    session = AutoSession("cpu")
    auto_hooks.start(session)
    assert torch.Tensor.to is not before[0]
    _loop(5)
    auto_hooks.stop()
    assert (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.copy_, torch.Tensor.pin_memory) == before
    assert torch.utils.data.dataloader._BaseDataLoaderIter.__next__ is next_before
    tl = session.close()
    assert len(tl) == 5 and (tl.bytes == 4 * 2 * 4).all()
    _loop(5)  # after: nothing is recorded
    assert len(session.close()) == 5


def test_a_sigterm_inside_the_hooks_own_code_stops_the_program() -> None:
    """SIGTERM lands while pinprof's hook runs its own guarded code (after the loader's ``next()``):
    it ends the loop as Terminated, and is not taken for pinprof's own error (which stops the
    profiling and lets the program go on: a SIGTERM so lost left ``pinprof profile`` running)."""
    import signal

    from profiler.report.signals import Terminated, install_sigterm, restore_sigterm

    session = AutoSession("cpu")
    arrived = session.arrived

    def arrived_then_signal(*args: object) -> None:
        arrived(*args)  # type: ignore[arg-type]
        signal.raise_signal(signal.SIGTERM)  # its handler raises here, inside the hook's guard

    session.arrived = arrived_then_signal  # type: ignore[method-assign,assignment]
    previous = install_sigterm()
    auto_hooks.start(session)
    try:
        with pytest.raises(Terminated):
            _loop(3)
    finally:
        auto_hooks.stop()
        restore_sigterm(previous)
        session.close()
    assert auto_hooks.failure is None


def test_a_lazy_module_moves_while_the_hooks_are_on() -> None:
    session = AutoSession("cpu")
    auto_hooks.start(session)
    try:
        model = torch.nn.LazyLinear(3).to("cpu")  # UninitializedParameter checks the methods it is given
        out = model(torch.ones(2, 5))
    finally:
        auto_hooks.stop()
        session.close()
    assert out.shape == (2, 3)


@pytest.mark.parametrize("collect", [False, True], ids=["sleeping", "collecting"])
@pytest.mark.parametrize(("sig", "code", "why"), [("SIGTERM", 143, "SIGTERM"), ("SIGINT", 130, "KeyboardInterrupt")])
def test_a_stopped_script_leaves_a_partial_report(tmp_path: Path, sig: str, code: int, why: str, collect: bool) -> None:
    """Stopped by the signal, the report is written, partial. ``collecting``: each step is a full
    garbage collection, so the signal's handler can run inside pinprof's callback at its end, where
    Python drops what it raises (``profiler.report.signals._Redeliver`` raises it again; without it,
    1 of 4 runs of the two ``collecting`` cases hung on the CPU machine)."""
    import signal

    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--", "python"]
    proc = subprocess.Popen(
        [*cmd, str(SCRIPTS / "endless.py"), *(["--collect"] if collect else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE.parent,
        preexec_fn=sigint_as_at_a_terminal,
    )
    assert proc.stdout is not None
    steps = 0
    while steps < 20:  # batches really iterated before the signal
        assert proc.stdout.readline().startswith("step")
        steps += 1
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err[-2000:]
    tl = read_timeline(out)
    assert len(tl) >= 20 and (tl.bytes == 8 * IMAGE).all()
    info = meta_of(out)
    assert info["partial"] is True and info["interrupted_by"] == why


def test_a_killed_script_leaves_the_batches_flushed_before(tmp_path: Path) -> None:
    import os
    import signal

    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--", "python"]
    env = {**os.environ, "PINPROF_FLUSH_S": "0.2"}
    proc = subprocess.Popen(
        [*cmd, str(SCRIPTS / "endless.py")], stdout=subprocess.PIPE, text=True, cwd=HERE.parent, env=env
    )
    assert proc.stdout is not None
    for _ in range(60):  # 60 batches of about 10 ms: three flushes or more
        assert proc.stdout.readline().startswith("step")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    wait_for_journal(out / "timeline.csv")  # the rows handed to its journal's process are written still
    tl = read_timeline(out)
    assert len(tl) >= 20 and (tl.bytes == 8 * IMAGE).all() and list(tl.batch) == list(range(len(tl)))
    info = meta_of(out)
    assert info["partial"] is True and info["status"] == "running"
