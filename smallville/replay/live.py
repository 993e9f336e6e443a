"""Replay in the terminal: the map with everyone on it, what each is doing, who is talking.

Keys: space pauses, left/right step one tick (or seek a quarter hour with [ and ]),
+/- change the speed, q quits.
"""

from __future__ import annotations

import bisect
import colorsys
import os
import select
import sys
import time
import zlib
from dataclasses import dataclass

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from smallville.replay.page import page_data
from smallville.replay.record import RunRecord


def _color(name: str, light: float) -> str:
    r, g, b = colorsys.hls_to_rgb((zlib.crc32(name.encode()) % 360) / 360, light, 0.45)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


@dataclass
class Player:
    """Where the replay is: the time, the speed, whether it runs, whom it follows."""

    t: float
    end: float
    tick: float
    speed: float = 600.0  # simulated seconds per wall second
    paused: bool = False
    agent: str | None = None

    def key(self, key: str) -> bool:
        """Apply one key press; False means quit."""
        steps = {"right": self.tick, "left": -self.tick, "]": 900.0, "[": -900.0}
        if key == "q":
            return False
        if key == " ":
            self.paused = not self.paused
        elif key in steps:
            self.t = min(self.end, max(0.0, self.t + steps[key]))
        elif key in "+=":
            self.speed *= 2
        elif key == "-":
            self.speed = max(self.tick / 4, self.speed / 2)
        return True

    def advance(self, wall_seconds: float) -> None:
        if not self.paused:
            self.t = min(self.end, self.t + wall_seconds * self.speed)


class Frames:
    """Draws the run at any time from the same data as the replay page."""

    def __init__(self, run: RunRecord) -> None:
        self.data = page_data(run)
        self.names = {a["id"]: a["name"] for a in self.data["agents"]}
        self.rows = self.data["map"]["rows"]
        legend = self.data["map"]["legend"]
        self.colors = [[self._tile_color(legend.get(ch, "wall")) for ch in row] for row in self.rows]
        self.times = {a: [k[0] for k in track] for a, track in self.data["tracks"].items()}
        self.doing_times = {a: [d[0] for d in doing] for a, doing in self.data["doing"].items()}

    @staticmethod
    def _tile_color(area: str) -> str:
        if area == "wall":
            return "#3c3a36"
        return _color(area.split(" / ")[0], 0.85 if "street" in area else 0.72)

    def position(self, agent: str, t: float) -> tuple[int, int]:
        track = self.data["tracks"][agent]
        i = max(0, bisect.bisect_right(self.times[agent], t) - 1)
        return track[i][1], track[i][2]

    def doing(self, agent: str, t: float) -> str:
        i = bisect.bisect_right(self.doing_times[agent], t) - 1
        return self.data["doing"][agent][i][1] if i >= 0 else "starting the day"

    def map_text(self, t: float, width: int, height: int, follow: str | None) -> Text:
        """The map in half-block characters (two tiles a character cell), cropped to fit."""
        where = {}
        for agent in sorted(self.names, key=lambda a: a == follow):  # the followed one on top
            c, r = self.position(agent, t)
            where[(c, r // 2)] = agent
        cols, lines = len(self.rows[0]), (len(self.rows) + 1) // 2
        c0 = r0 = 0
        if follow:
            fc, fr = self.position(follow, t)
            c0 = min(max(0, fc - width // 2), max(0, cols - width))
            r0 = min(max(0, fr // 2 - height // 2), max(0, lines - height))
        text = Text()
        for line in range(r0, min(lines, r0 + height)):
            for c in range(c0, min(cols, c0 + width)):
                top = self.colors[2 * line][c]
                bottom = self.colors[2 * line + 1][c] if 2 * line + 1 < len(self.rows) else top
                agent = where.get((c, line))
                if agent:
                    style = f"bold {'white on #c0392b' if agent == follow else 'black on ' + top}"
                    text.append(self.names[agent][0], style=style)
                else:
                    text.append("▀", style=f"{top} on {bottom}")
            text.append("\n")
        return text

    def frame(self, player: Player, width: int = 160, height: int = 40):
        data, t = self.data, player.t
        stamp = _stamp(data["start"], t)
        head = Text(
            f" {stamp}   speed {player.speed:g} sim-s/s {'(paused)' if player.paused else ''}"
            "   [space] pause  [←/→] step  [ / ] 15 min  [+/-] speed  [q] quit",
            style="bold reverse",
        )
        people = Table(show_header=False, box=None, pad_edge=False)
        for agent, name in self.names.items():
            style = "bold red" if agent == player.agent else ""
            people.add_row(Text(name, style=style), Text(self.doing(agent, t)[:60]))
        talk = Text()
        for ts, a, to, line in data["speech"]:
            if t - 10 * data["tick"] < ts <= t:
                talk.append(f"{self.names[a]} → {self.names[to]}: ", style="bold")
                talk.append(line + "\n")
        grid = Table.grid(padding=(0, 2))
        grid.add_row(self.map_text(t, max(20, width - 75), height - 4, player.agent), people)
        return Group(head, grid, talk)


def _stamp(start: str, t: float) -> str:
    from datetime import timedelta

    from smallville.timefmt import parse_datetime

    return (parse_datetime(start) + timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M")


def play(
    run: RunRecord,
    since: float = 0.0,
    agent: str | None = None,
    speed: float = 600.0,
    paused: bool = False,
    console: Console | None = None,
) -> None:
    """Play the run in the terminal until its end or `q`."""
    console = console or Console()
    frames = Frames(run)
    player = Player(since, frames.data["end"], frames.data["tick"], speed, paused, agent)
    with _keys() as read_key, Live(console=console, screen=True, auto_refresh=False) as live:
        last = time.monotonic()
        while True:
            live.update(frames.frame(player, console.width, console.height), refresh=True)
            key = read_key(0.1)
            if key and not player.key(key):
                return
            now = time.monotonic()
            player.advance(now - last)
            last = now
            if player.t >= player.end and not player.paused:
                player.paused = True


class _keys:
    """Raw single-key input from the terminal, restored on exit."""

    def __enter__(self):
        import termios
        import tty

        self.fd = sys.stdin.fileno()
        self.saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)
        return self.read

    def read(self, timeout: float) -> str | None:
        if not select.select([self.fd], [], [], timeout)[0]:
            return None
        key = os.read(self.fd, 1).decode(errors="ignore")
        if key == "\x1b":  # arrow keys: ESC [ C / ESC [ D
            seq = os.read(self.fd, 2).decode(errors="ignore")
            return {"[C": "right", "[D": "left"}.get(seq)
        return key

    def __exit__(self, *exc) -> None:
        import termios

        termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)
