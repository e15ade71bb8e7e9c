"""report.html in a real browser: headless Chromium (Debian's package, installed by scripts/test.sh)
opens the page of two committed reports from disk, with the network off; the DOM it built holds the
headline and the four lanes of each timeline, and its screenshot is not blank."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
REPORTS = [ROOT / "reports" / "h200-profile-resnet", ROOT / "reports" / "h200-gpu-bound"]
LANES = ("main thread", "pin step", "copy stream", "compute stream")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium not found: scripts/test.sh installs Debian's (apt-get install chromium)"
    return found


def browse(page: Path, *extra: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # --no-sandbox: CI runs as root, where Chromium refuses its sandbox; the page is our own file.
    cmd = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--proxy-server=127.0.0.1:9",  # no network: the page must need none
        "--window-size=1200,1800",
        *extra,
        page.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("folder", REPORTS, ids=lambda p: p.name)
def test_report_html_opens_in_chromium_with_headline_and_four_lanes(folder: Path, tmp_path: Path) -> None:
    page = folder / "report.html"
    source = page.read_text()
    assert "http://" not in source and "https://" not in source  # self-contained: nothing to fetch
    summary = json.loads((folder / "summary.json").read_text())
    headlines = [r["headline"] for r in summary]
    dom = browse(page, "--dump-dom", cwd=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = html.unescape(dom.stdout)
    shown = [html.unescape(m) for m in re.findall(r'<p class="headline" id="headline-\d+">(.*?)</p>', dom.stdout)]
    assert shown and sorted(shown) == sorted(headlines)
    # the script ran in the browser: it set each timeline's view to its steady batches, and marked it
    timelines = re.findall(r'<svg class="timeline"[^>]*>', dom.stdout)
    assert len(timelines) == len(headlines) and all('data-ready="1"' in t for t in timelines)
    for tag in timelines:
        steady = [float(v) for v in re.search(r'data-steady="([^"]+)"', tag).group(1).split()]  # type: ignore[union-attr]
        view = [float(v) for v in re.search(r'viewBox="([^"]+)"', tag).group(1).split()]  # type: ignore[union-attr]
        assert view[0] == pytest.approx(steady[0]) and view[2] == pytest.approx(steady[1])
    for lane in LANES:
        assert text.count(f'data-lane="{lane}"') == len(headlines), lane
    shot = tmp_path / "shot.png"
    done = browse(page, f"--screenshot={shot}", cwd=tmp_path)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    import matplotlib.image as mpimg

    pixels = mpimg.imread(str(shot))[..., :3]
    colours = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    inked = (pixels.sum(axis=2) < 2.9).mean()  # not white
    assert len(colours) > 50 and inked > 0.02, (len(colours), inked)
    # the lanes' phase colours are on screen (the timeline drew, not only text)
    cyan = np.array([0x17, 0xBE, 0xCF]) / 255  # GPU compute
    assert (np.abs(pixels - cyan).sum(axis=2) < 0.05).sum() > 500
