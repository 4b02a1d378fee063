"""The browser check (docs/browser_check.py, ``make docs-check``) finds what it looks for.

The full check runs on the real site in ``.ci/run``; here it runs on a tiny site with one good
and one broken page, to show that each of its checks can fail, and without Chromium.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "docs" / "browser_check.py"
sys.path.insert(0, str(ROOT / "docs"))
import browser_check  # noqa: E402

sys.path.remove(str(ROOT / "docs"))


@pytest.mark.parametrize(("ci", "code"), [(None, 0), ("true", 1)])
def test_without_chromium_the_check_says_how_to_get_it_and_fails_only_in_ci(ci, code, tmp_path):
    """Invariant: with no Chromium the check names the package to install; it exits 0 outside
    CI and 1 under CI=true."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["CHROMIUM"] = str(tmp_path / "no-such-chromium")
    if ci:
        env["CI"] = ci
    proc = subprocess.run(
        [sys.executable, str(CHECK), str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == code
    assert "Chromium not found" in proc.stderr and "apt-get install chromium" in proc.stderr


BAD_PAGE = """<!doctype html><html><head><title>bad</title>
<link rel="stylesheet" href="missing.css"></head><body>
<p>See :class:`DistributedSampler` for details.</p>
<img src="missing.svg" alt="a picture that is not there">
<pre><code style="white-space: pre; overflow: auto; display: block">{}</code></pre>
<script>console.error("boom")</script>
</body></html>""".format("x" * 400)
GOOD_PAGE = """<!doctype html><html><head><title>good</title></head><body>
<p>See <a href="#">DistributedSampler</a>.</p>
<details class="mkdocstrings-source"><pre><code>:class:`kept in the source`</code></pre></details>
<pre><code>short</code></pre></body></html>"""


@pytest.mark.skipif(browser_check.find_chromium() is None, reason="Chromium is not installed")
def test_each_page_check_catches_what_it_forbids(tmp_path):
    """Invariant: on a broken page the check reports the console error, the missing stylesheet
    and picture, the literal role and the code block that scrolls sideways; on a good page
    (a role inside a source listing is allowed) it reports nothing."""
    from playwright.sync_api import sync_playwright

    site = tmp_path / "site"
    for name, html in (("bad", BAD_PAGE), ("good", GOOD_PAGE)):
        (site / name).mkdir(parents=True)
        (site / name / "index.html").write_text(html)
    shots = tmp_path / "shots"
    shots.mkdir()
    server, base = browser_check.serve(site)
    try:
        with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
            context = browser_check.launch(p, profile, browser_check.find_chromium())
            bad = browser_check.check_page(context, base, "bad/", shots)
            good = browser_check.check_page(context, base, "good/", shots)
            context.close()
    finally:
        server.shutdown()
    report = "\n".join(bad)
    for expected in ("console error: boom", "missing.css", "missing.svg", "literal role: :class:`",
                     "scrolls sideways"):  # fmt: skip
        assert expected in report, f"{expected!r} not reported:\n{report}"
    assert good == []
    assert (shots / "bad.png").stat().st_size > 0
