"""Scenario and agent files: loading them into typed, immutable specs and reporting every problem.

load_scenario(path)      -> Scenario, or ScenarioError listing every problem
validate_files(paths)    -> list[Problem] for scenario and agent files
"""

from smallville.scenario.loader import load_scenario, validate_files
from smallville.scenario.model import (
    AgentSpec,
    MapObject,
    MapSpec,
    Probe,
    Problem,
    RoutineItem,
    Scenario,
    SeedMemory,
    WorldEvent,
)

__all__ = [
    "AgentSpec",
    "MapObject",
    "MapSpec",
    "Probe",
    "Problem",
    "RoutineItem",
    "Scenario",
    "SeedMemory",
    "WorldEvent",
    "load_scenario",
    "validate_files",
]
