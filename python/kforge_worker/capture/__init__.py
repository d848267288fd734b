"""Capture: a KernelBench problem's forward as a graph of canonical ops (src/optimize/graph.ts `Graph`)."""

from .pipeline import ProblemError, capture_problem

__all__ = ["ProblemError", "capture_problem"]
