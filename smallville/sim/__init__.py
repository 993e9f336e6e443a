"""The simulation: a SimPy clock driving every agent through perceive, store, reflect, plan, act."""

from smallville.sim.engine import SimConfig, Simulation

__all__ = ["SimConfig", "Simulation"]
