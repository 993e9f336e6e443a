"""`smallville serve`: runs in a browser, live or after the fact, from the run folders alone.

The server only reads: runs never know it is there. `runs.py` finds the runs under the
folder served (and nothing outside it), `feed.py` follows a run's event log from a byte
offset, `minds.py` restores states for the agent panel and interviews, `app.py` answers
HTTP and `run.html`/`index.html` are the pages.
"""

from smallville.serve.app import make_server, serve

__all__ = ["make_server", "serve"]
