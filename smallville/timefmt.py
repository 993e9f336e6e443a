"""Simulated time: durations ("90s", "10m", "1h", "2d"), date-times and clock times.

Simulated time inside the engine is seconds (a float) since the scenario's `start`.
"""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_CLOCK = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*$")
_DATETIME_FORMATS = ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S")


def parse_duration(text: str) -> float:
    """Seconds in a duration such as "90s", "10m", "1h" or "2d"; ValueError if malformed."""
    match = _DURATION.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"bad duration {text!r}: expected a positive number and a unit s, m, h or d (e.g. 10m)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_datetime(text: str | datetime) -> datetime:
    """A `YYYY-MM-DD HH:MM[:SS]` date-time; ValueError if malformed."""
    if isinstance(text, datetime):
        return text.replace(tzinfo=None)
    for fmt in _DATETIME_FORMATS:
        try:
            return datetime.strptime(str(text).strip(), fmt)
        except ValueError:
            continue
    raise ValueError(f"bad date-time {text!r}: expected YYYY-MM-DD HH:MM")


def parse_moment(text: str, first: datetime, last: datetime) -> datetime:
    """A time a user typed about a run that covers `first` to `last`: `YYYY-MM-DD HH:MM[:SS]`,
    or `HH:MM` alone, meaning that time on the one day of the run it falls in (else on the
    first day). ValueError if malformed, or if `HH:MM` falls in the run on several days."""
    try:
        return parse_datetime(text)
    except ValueError:
        pass
    try:
        minute = parse_clock(text)
    except ValueError:
        raise ValueError(f"bad date-time {text!r}: expected YYYY-MM-DD HH:MM, or HH:MM on a day of the run") from None
    days = range(max(0, (last.date() - first.date()).days) + 1)
    moments = [datetime.combine(first.date(), time()) + timedelta(days=d, minutes=minute) for d in days]
    within = [m for m in moments if first <= m <= last]
    if len(within) > 1:
        dates = ", ".join(f"{m:%Y-%m-%d}" for m in within)
        raise ValueError(
            f"{text.strip()} falls on {len(within)} days of the run ({dates}): "
            f"give the day too, e.g. '{within[-1]:%Y-%m-%d %H:%M}'"
        )
    return (within or moments)[0]


def parse_clock(text: str) -> int:
    """Minutes since midnight of a clock time "HH:MM"; ValueError if malformed."""
    match = _CLOCK.match(str(text))
    if not match or int(match.group(1)) > 23 or int(match.group(2)) > 59:
        raise ValueError(f"bad clock time {text!r}: expected HH:MM between 00:00 and 23:59")
    return int(match.group(1)) * 60 + int(match.group(2))


def format_duration(seconds: float) -> str:
    """The shortest exact duration string for a number of seconds ("1d", "90m", "45s")."""
    for unit in ("d", "h", "m"):
        if seconds >= _UNITS[unit] and seconds % _UNITS[unit] == 0:
            return f"{int(seconds // _UNITS[unit])}{unit}"
    return f"{seconds:g}s"


def sim_datetime(start: datetime, seconds: float) -> datetime:
    """The date-time `seconds` of simulated time after `start`."""
    return start + timedelta(seconds=seconds)


def format_sim(start: datetime, seconds: float) -> str:
    """`YYYY-MM-DD HH:MM:SS` of a simulated time."""
    return sim_datetime(start, seconds).strftime("%Y-%m-%d %H:%M:%S")


def clock_of_day(minute: int) -> str:
    """`HH:MM` of a minute of a day; a minute past the day's end is the next day's
    (`1800` -> `06:00 next day`)."""
    text = f"{minute // 60 % 24:02d}:{minute % 60:02d}"
    return text if minute < 24 * 60 else text + " next day"


def moment(when: datetime) -> str:
    """A date and time as prompts give the present: `Monday, February 13, 2023, 10:30`."""
    return f"{when:%A}, {when:%B} {when.day}, {when.year}, {when:%H:%M}"


def relative_moment(then: datetime, now: datetime) -> str:
    """When something happened, as seen from `now`: `today 09:15`, `yesterday 18:30`, or
    `Mon 13 Feb 10:02` further back (or ahead)."""
    days = (now.date() - then.date()).days
    if days == 0:
        return f"today {then:%H:%M}"
    if days == 1:
        return f"yesterday {then:%H:%M}"
    return f"{then:%a} {then.day} {then:%b} {then:%H:%M}"
