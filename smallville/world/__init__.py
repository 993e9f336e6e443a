"""The town: its grid, places, objects, and who is where."""

from smallville.world.grid import Grid
from smallville.world.world import Thing, World

__all__ = ["Grid", "Thing", "World"]
