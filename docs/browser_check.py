"""``make docs-check``: open every page of the built site in a real (headless) Chromium.

Serves ``site/`` on 127.0.0.1 (a free port) and, in a 1280x800 window, checks on every page:

- it loads with no console error, no uncaught exception, and no picture, script or stylesheet
  that fails to load (every ``<img>`` decoded, every request answered);
- no Sphinx role (``:class:``, ``:func:``, ...) shows as literal text outside source listings;
- no code block scrolls sideways (``scrollWidth <= clientWidth``; blocks in closed tabs and
  collapsed notes are opened first, so every block is measured);

and once for the site: the search box finds ``DistributedSamplerWrapper`` and ``set_epoch``; the
copy button of a ``>>>`` example copies the code without the prompts and the output. A screenshot
of every page goes to ``site/screenshots/``.

Chromium is Debian's ``chromium`` package (``/usr/bin/chromium``), driven by playwright's
Python API; playwright's own browser download is not used. Without Chromium the check says how
to get it and exits 0, or 1 under ``CI=true``.

Run: ``python docs/browser_check.py [site]`` (after ``mkdocs build``).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|exc|obj|data):`")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SEARCHES = ["DistributedSamplerWrapper", "set_epoch"]

# opens every tab and note, so that every code block is laid out and measured
SHOW_ALL = """() => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  const style = document.createElement('style');
  style.textContent = '.tabbed-set > .tabbed-content > .tabbed-block {display: block !important}';
  document.head.appendChild(style);
}"""
# code blocks wider than their box: [page text of the first line, scrollWidth, clientWidth]
WIDE_BLOCKS = """() => [...document.querySelectorAll('pre > code')]
  .filter(el => el.scrollWidth > el.clientWidth + 1)
  .map(el => [el.innerText.split('\\n')[0].slice(0, 80), el.scrollWidth, el.clientWidth])"""
BROKEN_IMAGES = """() => [...document.images]
  .filter(img => !img.complete || img.naturalWidth === 0).map(img => img.src)"""
# the page's visible text, source listings left out (they show the file as it is)
PROSE = """() => {
  const body = document.body.cloneNode(true);
  body.querySelectorAll('details.mkdocstrings-source').forEach(el => el.remove());
  // a module of src/ shown whole on a tutorial: source code, where roles are the source's own
  body.querySelectorAll('.highlight').forEach(el => {
    const name = el.querySelector('.filename');
    if (name && name.textContent.startsWith('src/distsampling/')) el.remove();
  });
  return body.textContent;
}"""


def find_chromium() -> str | None:
    """$CHROMIUM if set (and only it), else Debian's /usr/bin/chromium or chromium on PATH."""
    if "CHROMIUM" in os.environ:
        return shutil.which(os.environ["CHROMIUM"])
    return shutil.which("/usr/bin/chromium") or shutil.which("chromium")


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def pages(site: Path) -> list[str]:
    """Every page of the site, as a URL path ('' for the home page)."""
    found = []
    for html in sorted(site.rglob("index.html")):
        rel = html.parent.relative_to(site).as_posix()
        if not rel.startswith(("screenshots", "assets")):
            found.append("" if rel == "." else rel + "/")
    return found


def check_page(context, base: str, path: str, shots: Path) -> list[str]:
    page = context.new_page()
    problems: list[str] = []
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: problems.append(f"uncaught exception: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"failed to load {r.url} ({r.failure})"))
    page.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status} for {r.url}") if r.status >= 400 else None,
    )
    page.goto(base + path, wait_until="networkidle")
    problems += [f"picture not shown: {src}" for src in page.evaluate(BROKEN_IMAGES)]
    problems += [f"literal role: {m.group(0)}" for m in ROLE.finditer(page.evaluate(PROSE))]
    name = path.strip("/").replace("/", "-") or "index"
    page.screenshot(path=str(shots / f"{name}.png"), full_page=False)
    page.evaluate(SHOW_ALL)
    for first_line, scroll, client in page.evaluate(WIDE_BLOCKS):
        problems.append(f"code block scrolls sideways ({scroll} > {client} px): {first_line!r}")
    page.close()
    return [f"/{path}: {p}" for p in problems]


def check_search(context, base: str) -> list[str]:
    page = context.new_page()
    page.goto(base, wait_until="networkidle")
    problems = []
    for term in SEARCHES:
        box = page.locator("input.md-search__input")  # in the header at 1280 px wide
        box.click()
        box.fill("")
        box.press_sequentially(term, delay=20)  # typed: Material searches on key events
        try:
            page.wait_for_selector(".md-search-result__item", timeout=10_000)
        except Exception:
            problems.append(f"search: no result for {term!r}")
            continue
        text = page.inner_text(".md-search-result")
        if term.lower() not in text.lower():
            problems.append(f"search: the results for {term!r} do not mention it")
        page.keyboard.press("Escape")
    page.close()
    return problems


# the text the copy button puts on the clipboard, caught from the copy event
CATCH_COPY = """() => { window.__copied = null;
  document.addEventListener('copy', () => { window.__copied = document.getSelection().toString(); },
                            {capture: true}); }"""


def check_copy_button(context, base: str, site: Path) -> list[str]:
    """The copy button of the first ``>>>`` example copies code without prompts or output."""
    for path in pages(site):
        if ">>>" not in (site / path / "index.html").read_text().replace("&gt;", ">"):
            continue
        page = context.new_page()
        page.goto(base + path, wait_until="networkidle")
        block = page.locator("div.highlight:has(.gp)").filter(visible=True).first
        if block.count() == 0:
            page.close()
            continue
        block.scroll_into_view_if_needed()  # Material adds the button to blocks in view
        code = block.locator("code").inner_text()
        block.hover()
        page.evaluate(CATCH_COPY)
        block.locator("button[data-clipboard-target]").click()
        page.wait_for_function("() => window.__copied !== null", timeout=5_000)
        copied = page.evaluate("() => window.__copied")
        page.close()
        problems = []
        if not copied.strip():
            problems.append("copy button: nothing copied")
        if ">>>" in copied or "... " in copied:
            problems.append(f"copy button: the prompts were copied: {copied!r}")
        outputs = [ln for ln in code.splitlines() if ln and not ln.startswith((">>>", "..."))]
        leaked = [ln for ln in outputs if ln in copied.splitlines()]
        if leaked:
            problems.append(f"copy button: the output was copied: {leaked}")
        commands = [ln[4:] for ln in code.splitlines() if ln.startswith(">>> ")]
        if [ln for ln in copied.splitlines() if ln.strip()] != commands:
            problems.append(f"copy button on /{path}: copied {copied!r}, expected {commands}")
        return problems
    return ["copy button: no >>> example found on any page"]


def launch(p, profile: str, chromium: str):
    """A fresh headless Chromium (its own --user-data-dir), 1280x800, cut off from outside."""
    context = p.chromium.launch_persistent_context(
        profile,
        executable_path=chromium,
        headless=True,
        args=CHROMIUM_ARGS,
        viewport={"width": 1280, "height": 800},
    )
    # nothing leaves this machine: a request to anywhere else fails, and is reported
    context.route(re.compile(r"^(?!http://127\.0\.0\.1:)"), lambda route: route.abort())
    return context


def main() -> int:
    site = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "site").resolve()
    chromium = find_chromium()
    if chromium is None:
        print(
            "docs-check: Chromium not found. Install Debian's package (`sudo apt-get install "
            "chromium`, which `make install` does where apt-get exists) or set CHROMIUM=/path.",
            file=sys.stderr,
        )
        return 1 if os.environ.get("CI") == "true" else 0
    if not (site / "index.html").exists():
        print(f"docs-check: no built site in {site}: run `make docs` first", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    shots = site / "screenshots"
    shots.mkdir(exist_ok=True)
    server, base = serve(site)
    problems: list[str] = []
    all_pages = pages(site)
    try:
        with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
            context = launch(p, profile, chromium)
            for path in all_pages:
                problems += check_page(context, base, path, shots)
            problems += check_search(context, base)
            problems += check_copy_button(context, base, site)
            context.close()
    finally:
        server.shutdown()
    for problem in problems:
        print(problem)
    print(
        f"docs-check: {len(all_pages)} pages in Chromium at 1280x800, {len(problems)} problems; "
        f"screenshots in {shots.relative_to(ROOT) if shots.is_relative_to(ROOT) else shots}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
