"""The README's picture of `smallville serve` (docs/serve.png): a run's page in headless
chromium, an agent chosen, a question asked.

    python tools/serve_screenshot.py RUNS_DIR [--agent ID] [--at SECONDS] [--out docs/serve.png]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs_dir", type=Path)
    parser.add_argument("--agent", default="isabella_rodriguez")
    parser.add_argument("--at", type=float, help="seconds since the start (default: the run's end)")
    parser.add_argument("--question", default="What are you planning for Valentine's Day?")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "serve.png")
    parser.add_argument("--size", default="1280x760")
    args = parser.parse_args()
    from browser import Browser

    from smallville.serve import make_server

    run = sorted(p for p in args.runs_dir.iterdir() if (p / "manifest.json").exists())[-1]
    server = make_server(args.runs_dir, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    width, height = map(int, args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp, Browser(Path(tmp), width, height) as page:
        page.open(f"{server.url}run?id={run.name}#agent={args.agent}")
        page.wait_for("document.body.dataset.caught && drawn", what="the run")
        if args.at is not None:
            page.evaluate(f"slider.value = {args.at}; slider.dispatchEvent(new Event('input')); 1")
        page.wait_for("!!document.getElementById('activity')", what="the agent panel")
        page.evaluate(f"document.getElementById('question').value = {args.question!r}; "
                      "document.getElementById('send').click(); 1")
        page.wait_for("document.body.dataset.answered", what="the answer")
        page.evaluate("document.getElementById('answer').scrollIntoView(); scroller.scrollLeft = 0; 1")
        page.screenshot(args.out)
        assert not page.errors, page.errors
    server.shutdown()
    try:                                   # fewer colours, a smaller file (with Pillow, if it is here)
        from PIL import Image

        Image.open(args.out).convert("RGB").quantize(128).save(args.out, optimize=True)
    except ImportError:
        pass
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
