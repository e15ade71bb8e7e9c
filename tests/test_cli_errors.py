"""How the CLI fails: a bad input is one line and exit 2; a bug in pinprof is a traceback, exit 70."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from profiler.cli import build_parser, main
from profiler.report import folder

DATA = Path(__file__).parent / "data" / "h200_default"


def test_a_bug_shows_its_traceback_and_asks_for_a_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object) -> None:
        raise KeyError("a column pinprof itself forgot")

    monkeypatch.setattr(folder, "diagnosis_of", broken)
    assert main(["diagnose", str(DATA / "timeline.csv")]) == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "KeyError: 'a column pinprof itself forgot'" in err
    assert "internal error (a bug in pinprof, not in your input)" in err


def test_a_value_error_inside_pinprof_is_a_bug_not_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object) -> None:
        raise ValueError("an internal slip")

    monkeypatch.setattr(folder, "diagnosis_of", broken)
    assert main(["diagnose", str(DATA / "timeline.csv")]) == 70  # was 2: any ValueError looked like bad input
    assert "Traceback" in capsys.readouterr().err


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "timeline.csv").write_text("not,a,timeline\n1,2,3\n")
    assert main(["diagnose", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pinprof diagnose: error: ") and "missing column(s) mode, batch, bytes" in err
    assert "Traceback" not in err


def test_every_verbs_help_prints_its_percent_signs_once() -> None:
    """argparse formats help with ``%``: a literal ``95%`` must be written ``95%%`` in the source, and
    ``tune --help`` once printed "95%%" where the source doubled it in a string argparse does not format."""
    parser = build_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {name: sub.format_help() for name, sub in verbs.choices.items()}
    assert "tune" in helps and "profile" in helps
    doubled = {name: text for name, text in helps.items() if "%%" in text}
    assert not doubled, doubled
    assert "95%" in helps["tune"]
