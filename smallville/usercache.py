"""What is slow to build and the same every time, kept in the user's cache folder: the
embedding model, read from its package's files in about a second, is read back from its
pickle in a tenth of that.

The folder is `$SMALLVILLE_CACHE`, else `$XDG_CACHE_HOME/smallville`, else
`~/.cache/smallville`; deleting it only costs the time to build again. A file is named by
what it was built from (`key`: versions, sizes and times of the files read), so a new
version never reads an old one's; one that cannot be read is built again and replaced, and
one that cannot be written is not kept (a read-only home works, only slower).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def cache_dir() -> Path | None:
    """The folder things are kept in (None: no home to keep them in)."""
    if os.environ.get("SMALLVILLE_CACHE"):
        return Path(os.environ["SMALLVILLE_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "smallville"
    home = os.path.expanduser("~")
    return Path(home, ".cache", "smallville") if os.path.isabs(home) else None


def file_key(path: str | os.PathLike) -> str:
    """A file as a key names it: its path, size and time of change."""
    stat = os.stat(path)
    return f"{os.fspath(path)}:{stat.st_size}:{stat.st_mtime_ns}"


def kept(name: str, key: Sequence[str], build: Callable[[], T]) -> T:
    """What `build` returns, read from the cache when it was kept there with the same `key`
    (and kept there when it was not)."""
    folder = cache_dir()
    if folder is None:
        return build()
    digest = hashlib.sha256("\n".join(key).encode()).hexdigest()[:16]
    path = folder / f"{name}-{digest}.pickle"
    try:
        with open(path, "rb") as f:
            value: T = pickle.load(f)
        return value
    except Exception:  # missing, torn or from elsewhere: built again
        pass
    value = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, part = tempfile.mkstemp(dir=path.parent, prefix=f".{name}-", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(part, path)  # whole or not at all, whoever else writes it
        finally:
            if os.path.exists(part):
                os.unlink(part)
    except Exception:  # (a full disk, a read-only home, what does not pickle): not kept
        pass
    return value
