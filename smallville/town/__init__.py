"""Generated towns: `generate_town(n, seed)` builds a valid scenario of n agents, and
`write_town` writes it with its `agents/` folder. See `smallville town generate` and docs/towns.md."""

from smallville.errors import TownExists, TownTooLarge
from smallville.town.generate import Town, generate_town, write_town

__all__ = ["Town", "TownExists", "TownTooLarge", "generate_town", "write_town"]
