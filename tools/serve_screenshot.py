"""The pictures of the pages (docs/serve.png, docs/replay.png): a run's page in headless
chromium, an agent chosen; on `smallville serve`'s page a question asked, or with --replay the
page `smallville replay --html` writes.

    python tools/serve_screenshot.py RUNS_DIR [--agent ID] [--at SECONDS] [--out docs/serve.png]
    python tools/serve_screenshot.py RUNS_DIR --replay --at 124200 --size 1480x720 --out docs/replay.png
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def serve_page(page, runs_dir: Path, run: Path, args) -> None:
    """The run's page on a server of its own, the agent asked `args.question`."""
    from smallville.serve import make_server

    server = make_server(runs_dir, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    page.open(f"{server.url}run?id={run.name}#agent={args.agent}")
    page.wait_for("document.body.dataset.caught && drawn", what="the run")
    if args.at is not None:
        page.evaluate(f"slider.value = {args.at}; slider.dispatchEvent(new Event('input')); 1")
    page.wait_for("!!document.getElementById('activity')", what="the agent panel")
    page.evaluate(
        f"document.getElementById('question').value = {args.question!r}; document.getElementById('send').click(); 1"
    )
    page.wait_for("document.body.dataset.answered", what="the answer")
    page.evaluate("document.getElementById('answer').scrollIntoView(); scroller.scrollLeft = 0; 1")
    page.wait_for("drawn && scroller.scrollLeft === 0", what="the map redrawn")
    page.screenshot(args.out)
    server.shutdown()


def replay_page(page, run: Path, folder: Path, args) -> None:
    """The page `smallville replay --html` writes, at `args.at` (default: the start)."""
    from smallville.replay import load_run
    from smallville.replay.page import render_page

    html = folder / "replay.html"
    html.write_text(render_page(load_run(run)), encoding="utf-8")
    page.open(f"{html.as_uri()}#t={args.at or 0:g}&agent={args.agent}")
    page.wait_for("document.body.dataset.positions", what="the page")
    page.screenshot(args.out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs_dir", type=Path)
    parser.add_argument("--agent", default="isabella_rodriguez")
    parser.add_argument(
        "--at", type=float, help="seconds since the start (default: the run's end; --replay: its start)"
    )
    parser.add_argument("--question", default="What are you planning for Valentine's Day?")
    parser.add_argument("--replay", action="store_true", help="the replay page instead of serve's")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "serve.png")
    parser.add_argument("--size", default="1280x760")
    args = parser.parse_args()
    from browser import Browser

    run = sorted(p for p in args.runs_dir.iterdir() if (p / "manifest.json").exists())[-1]
    width, height = map(int, args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp, Browser(Path(tmp) / "profile", width, height) as page:
        if args.replay:
            replay_page(page, run, Path(tmp), args)
        else:
            serve_page(page, args.runs_dir, run, args)
        assert not page.errors, page.errors
    try:  # fewer colours, a smaller file (with Pillow, if it is here)
        from PIL import Image

        Image.open(args.out).convert("RGB").quantize(128).save(args.out, optimize=True)
    except ImportError:
        pass
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
