"""capture_problem(path): the problem file → a graph.ts `Graph` (a JSON-ready dict).

fx first, torch.export as the fallback, "none" with the reasons when both fail. Whatever the outcome,
the parts the emitter needs to write a correct file (source, params, modules, scalarAttrs, inputs) are
filled. A file that is not a usable problem raises ProblemError (the CLI's exit 2).
"""

from __future__ import annotations

import inspect
import os
import time
from typing import Any, Callable

import torch

from ..errors import exception_headline
from ..loading import LoadError, check_problem, import_path, read_source
from .build import meta_inputs, meta_model, stderr_log
from .encode import const, meta_of_tensor
from .export_capture import ExportGraphWriter, export_program
from .fx_capture import FxGraphWriter, propagate_shapes, trace
from .model_info import AttrMatcher, modules_info, params_info, scalar_attrs
from .source import split_source


class ProblemError(Exception):
    """The file cannot be captured as a problem at all; the message is one line naming it."""


def _one_line(exc: BaseException) -> str:
    return " ".join(exception_headline(exc).split())


def _forward_inputs(model: torch.nn.Module, inputs: list[Any]) -> list[dict[str, Any]]:
    out = []
    params = inspect.signature(model.forward).parameters.values()
    for i, p in enumerate(params):
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if i < len(inputs):
            value = inputs[i]
        else:
            value = None if p.default is inspect.Parameter.empty else p.default
        if isinstance(value, torch.Tensor):
            out.append({"name": p.name, "meta": meta_of_tensor(value), "value": None})
        else:
            out.append({"name": p.name, "meta": None, "value": const(value)})
    return out


def _load(path: str, log: Callable[[str], None]) -> tuple[Any, dict[str, Any], torch.nn.Module, list[Any]]:
    name = os.path.basename(path)
    try:
        text = read_source(path, "problem")
        source = split_source(text)
    except LoadError as exc:
        raise ProblemError(str(exc)) from exc
    except SyntaxError as exc:
        raise ProblemError(f"problem {name} does not parse: {_one_line(exc)}") from exc
    try:
        module = import_path(path, "problem")
        check_problem(module, path)
    except LoadError as exc:
        raise ProblemError(str(exc)) from exc
    except BaseException as exc:  # noqa: BLE001 — the file's own top-level code failed
        raise ProblemError(f"problem {name} failed to import: {_one_line(exc)}") from exc
    try:
        init_inputs = list(module.get_init_inputs())
        model, how = meta_model(module.Model, init_inputs, log)
    except Exception as exc:  # noqa: BLE001
        raise ProblemError(f"problem {name}: Model(*get_init_inputs()) failed: {_one_line(exc)}") from exc
    log(f"model built on {how}")
    try:
        inputs = meta_inputs(module.get_inputs, log)
    except Exception as exc:  # noqa: BLE001
        raise ProblemError(f"problem {name}: get_inputs() failed: {_one_line(exc)}") from exc
    return module, source, model, inputs


def capture_problem(path: str, log: Callable[[str], None] = stderr_log) -> dict[str, Any]:
    module, source, model, inputs = _load(path, log)
    matcher = AttrMatcher(model, "\n".join([source["forward"], *source["methods"]]))
    graph: dict[str, Any] = {
        "captured": "none",
        "failure": None,
        "torchVersion": torch.__version__,
        "inputs": _forward_inputs(model, inputs),
        "nodes": [],
        "output": const(None),
        "params": params_info(model),
        "modules": modules_info(model),
        "scalarAttrs": scalar_attrs(model),
        "source": source,
    }
    started = time.perf_counter()
    try:
        gm, runtime = trace(model, inputs)
        propagate_shapes(gm, runtime)
        writer = FxGraphWriter(gm, model, module, matcher)
        graph.update(captured="fx", nodes=writer.nodes(), output=writer.output())
        log(f"captured with torch.fx in {time.perf_counter() - started:.2f}s: {len(graph['nodes'])} nodes")
        return graph
    except Exception as exc:  # noqa: BLE001 — fx's failure is a result, then export gets its turn
        fx_error = _one_line(exc)
        log(f"torch.fx failed: {fx_error}")
    started = time.perf_counter()
    try:
        names = [p.name for p in inspect.signature(model.forward).parameters.values()]
        program = export_program(model, inputs)
        ex_writer = ExportGraphWriter(program, names, matcher)
        graph.update(captured="export", nodes=ex_writer.nodes(), output=ex_writer.output())
        log(f"captured with torch.export in {time.perf_counter() - started:.2f}s: {len(graph['nodes'])} nodes")
        return graph
    except Exception as exc:  # noqa: BLE001
        export_error = _one_line(exc)
        log(f"torch.export failed: {export_error}")
    graph["failure"] = f"torch.fx: {fx_error}; torch.export: {export_error}"
    return graph
