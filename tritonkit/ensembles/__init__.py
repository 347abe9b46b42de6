"""Pipeline graphs (ensemble steps wired by tensor names) and their static data-flow checks."""

from __future__ import annotations

from tritonkit.ensembles.graph import FlowIssue, StepWiring, analyze_dataflow, find_cycles

__all__ = ["FlowIssue", "StepWiring", "analyze_dataflow", "find_cycles"]
