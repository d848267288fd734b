"""capture_problem(path): the problem file → a graph.ts `Graph` (a JSON-ready dict).

fx first, torch.export as the fallback, "none" with the reasons when both fail. Whatever the outcome,
the parts the emitter needs to write a correct file (source, params, modules, scalarAttrs, inputs) are
filled. A file that is not a usable problem raises ProblemError (the CLI's exit 2).
"""

from __future__ import annotations

import ast
import inspect
import operator
import os
import time
from typing import Any, Callable

import torch

from ..errors import exception_headline
from ..loading import LoadError, check_problem, import_path, read_source
from .build import FactoriesOn, meta_inputs, meta_model, stderr_log
from .encode import const, meta_of_tensor
from .export_capture import ExportGraphWriter, export_program, inline_grad_mode_blocks
from .fx_capture import FxGraphWriter, propagate_shapes, reads_training_flag, trace
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


def _unguarded(inputs: list[dict[str, Any]]) -> list[str]:
    """Non-tensor forward arguments the emitted forward cannot guard: a graph is specialised to each one's
    value, checked by comparing with it written as a Python literal, which a list of tensors (or any object
    whose repr is not a literal) has not. Their names."""
    names = []
    for entry in inputs:
        value = entry["value"]
        if not value or value.get("pytype") != "other":
            continue
        try:
            ast.literal_eval(value["value"])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            names.append(entry["name"])
    return names


def _annotation_text(annotation: Any) -> str | None:
    """An annotation as the emitted file can write it (a class of builtins or torch), else None (dropped)."""
    if isinstance(annotation, type) and annotation.__module__ in ("builtins", "torch"):
        name = annotation.__qualname__
        return name if annotation.__module__ == "builtins" else f"torch.{name}"
    return None


def _inherited_forward(forward: Callable[..., Any]) -> tuple[str, str]:
    """(signature, def) of a forward Model inherits (`class Model(nn.Sequential)` without a forward of its own):
    ModelNew derives from the same bases, so its forward calls theirs."""
    params, args = [], []
    for i, p in enumerate(inspect.signature(forward).parameters.values()):
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            star = "*" if p.kind is inspect.Parameter.VAR_POSITIONAL else "**"
            params.append(f"{star}{p.name}")
            args.append(f"{star}{p.name}")
            continue
        text = p.name
        annotation = _annotation_text(p.annotation)
        if annotation:
            text += f": {annotation}"
        if p.default is not inspect.Parameter.empty:
            text += f" = {p.default!r}" if annotation else f"={p.default!r}"
        params.append(text)
        if i > 0:
            args.append(f"{p.name}={p.name}" if p.kind is inspect.Parameter.KEYWORD_ONLY else p.name)
    signature = ", ".join(params)
    return signature, f"    def forward({signature}):\n        return super().forward({', '.join(args)})"


def _load(
    path: str, log: Callable[[str], None]
) -> tuple[Any, dict[str, Any], torch.nn.Module, list[Any], list[str]]:
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
    if not source["forward"]:
        source["signature"], source["forward"] = _inherited_forward(module.Model.forward)
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
    try:
        lazy = _materialise_lazy(model, inputs, log)
    except Exception as exc:  # noqa: BLE001
        raise ProblemError(f"problem {name}: the first call of its lazy modules failed: {_one_line(exc)}") from exc
    return module, source, model, inputs, lazy


def _materialise_lazy(model: torch.nn.Module, inputs: list[Any], log: Callable[[str], None]) -> list[str]:
    """Lazy modules (nn.LazyLinear, nn.LazyConv2d) take their parameters' shapes from their first call, so the
    model has none to capture until it ran: one call on the meta inputs gives them, as the reference's first
    call does. The buffers holding real values (BatchNorm's step counters) are put back: that call is not one of
    the reference's. Returns one uninitialised tensor's path per lazy module (the emitted forward's check)."""
    lazy: dict[str, str] = {}
    for path, module in model.named_modules():
        for name, tensor in [*module._parameters.items(), *module._buffers.items()]:
            if isinstance(tensor, torch.nn.parameter.UninitializedTensorMixin):
                lazy.setdefault(path, f"{path}.{name}" if path else name)
    if not lazy:
        return []
    kept = {name: buf.clone() for name, buf in model.named_buffers() if not buf.is_meta}
    with FactoriesOn("meta"), torch.no_grad():
        model(*inputs)
    for name, buf in model.named_buffers():
        if name in kept:
            buf.copy_(kept[name])
    log("lazy modules materialised by one call on the meta inputs")
    return list(lazy.values())


def _state_versions(model: torch.nn.Module) -> dict[str, int]:
    """Version counters of the parameters and buffers fx's trace may change. BatchNorm's num_batches_tracked is
    left out: its module bumps it outside F.batch_norm while traced, and the emitted forward keeps that
    update with the batch_norm call (the module, or the normalisation region's running-stats update)."""
    bn_counters = {f"{name}.num_batches_tracked".lstrip(".") for name, m in model.named_modules()
                   if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)}
    return {name: t._version for name, t in [*model.named_parameters(), *model.named_buffers()]
            if name not in bn_counters}


def _attribute_names(model: torch.nn.Module) -> set[str]:
    """The root's attribute names before tracing (fx attaches the constants it lifts to the root)."""
    return {*vars(model), *model._parameters, *model._buffers, *model._modules}


def _check_faithful_fx(model: torch.nn.Module, versions: dict[str, int]) -> None:
    """fx runs what does not touch its proxies at trace time: an in-place change of a parameter or buffer
    (`self.v.mul_(0.9)`) then happens once, during tracing, and never in the graph, which would answer wrong:
    fx's capture is refused (export next). Checked right after tracing: shape propagation then runs the leaf
    modules, whose own updates (InstanceNorm's running statistics) are the graph's module calls."""
    changed = [name for name, t in [*model.named_parameters(), *model.named_buffers()]
               if name in versions and t._version != versions[name]]
    if changed:
        raise RuntimeError(f"forward changes {', '.join(changed)} in place outside the traced graph")


#: Calls whose result may share its first argument's storage: an in-place write through one writes that argument.
_ALIASING_METHODS = frozenset(
    "view view_as reshape reshape_as squeeze unsqueeze transpose permute t expand expand_as narrow select flatten "
    "unflatten as_strided detach diagonal movedim swapaxes swapdims unfold split chunk unbind contiguous __getitem__".split()
)
_INPLACE_OPERATORS = {
    operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift,
}
_ALIASING_FUNCTIONS = {getattr(torch, n) for n in _ALIASING_METHODS if hasattr(torch, n)} | {operator.getitem, getattr}


def _written_operand(node: torch.fx.Node) -> Any:
    """The tensor a call writes in place (None: it writes none)."""
    if node.op == "call_method" and node.target.endswith("_") and not node.target.endswith("__"):
        return node.args[0] if node.args else None
    if node.op == "call_function":
        if node.target in _INPLACE_OPERATORS or node.kwargs.get("inplace") is True:
            return node.args[0] if node.args else None
        if node.kwargs.get("out") is not None:
            return node.kwargs["out"]
        name = getattr(node.target, "__name__", "")
        if name.endswith("_") and not name.endswith("__") and node.args:
            return node.args[0]
    if node.op == "call_module" and node.args:
        module = node.graph.owning_module.get_submodule(str(node.target))
        if getattr(module, "inplace", False) is True:
            return node.args[0]
    return None


def _python_state(model: torch.nn.Module) -> dict[tuple[str, str], Any]:
    """The plain attributes of every module (`self.scale = 1.0`, `self.cache = None`): tensors, submodules and
    private names left out (version counters and the module tree cover those)."""
    return {(prefix, key): value for prefix, m in model.named_modules() for key, value in vars(m).items()
            if not key.startswith("_") and key != "training"}


def _check_python_state(model: torch.nn.Module, before: dict[tuple[str, str], Any]) -> None:
    """A forward that assigns a module attribute (`self.scale = self.scale * 0.5`, `self.h = x.mean()`) runs
    that assignment once, while traced, and the graph holds the value it had then: fx's and export's captures
    would answer the second call with the first call's state, so neither is taken."""
    after = _python_state(model)
    changed = []
    for key in before.keys() | after.keys():
        old, new = before.get(key, _MISSING), after.get(key, _MISSING)
        if old is new:
            continue
        try:
            same = type(old) is type(new) and isinstance(old, (int, float, bool, str, tuple)) and bool(old == new)
        except Exception:  # noqa: BLE001 — a tuple of tensors or proxies compares to no bool
            same = False
        if not same:
            changed.append(".".join(part for part in key if part))
    if changed:
        raise RuntimeError(f"forward assigns module attributes ({', '.join(sorted(changed))}): not a graph op")


_MISSING = object()


def _check_no_state_writes(gm: torch.fx.GraphModule, model: torch.nn.Module) -> None:
    """Buffers are graph values while fx traces (a causal mask sliced by a traced size needs that), so an in-place
    update of one (`self.ema.mul_(0.9)`, usually under `torch.no_grad()`, which fx does not record) is a graph
    op: fx's capture is refused and export, which keeps the grad-mode block, takes its turn."""
    state = {name for name, _ in [*model.named_parameters(), *model.named_buffers()]}
    for node in gm.graph.nodes:
        target = _written_operand(node)
        while isinstance(target, torch.fx.Node) and target.op in ("call_method", "call_function") and target.args and (
            target.target in _ALIASING_METHODS if target.op == "call_method" else target.target in _ALIASING_FUNCTIONS
        ):
            target = target.args[0]
        if isinstance(target, torch.fx.Node) and target.op == "get_attr" and target.target in state:
            raise RuntimeError(f"forward changes {target.target} in place")


def _check_no_folded_constants(before: set[str], nodes: list[dict[str, Any]]) -> None:
    """An expression of buffers and constants (`self.s * 3.0`, `torch.tensor([1., 2.])`) that fx evaluated while
    tracing becomes a `_tensor_constant` frozen then, stale after load_state_dict: fx's capture is refused."""
    folded = [n["target"] for n in nodes if n.get("kind") == "get_attr" and str(n["target"]).split(".")[0] not in before]
    if folded:
        raise RuntimeError(f"fx folded tensor expressions into constants the model does not hold: {', '.join(folded)}")


def _check_faithful_export(program: Any) -> None:
    """What the export writer does not carry into the emitted forward: tensor constants lifted out of it and
    buffers the forward mutates (they would never be written back)."""
    sig = program.graph_signature
    lifted = list(getattr(sig, "inputs_to_lifted_tensor_constants", {}) or {})
    if lifted:
        raise RuntimeError(f"forward creates tensor constants ({', '.join(lifted)})")
    mutated = list((getattr(sig, "buffers_to_mutate", {}) or {}).values())
    if mutated:
        raise RuntimeError(f"forward mutates buffers {', '.join(mutated)}")


def capture_problem(path: str, log: Callable[[str], None] = stderr_log) -> dict[str, Any]:
    module, source, model, inputs, lazy = _load(path, log)
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
        "specialisedTraining": None,
    }
    if lazy:
        graph["lazyTensors"] = lazy
    variadic = [("*" if p.kind is inspect.Parameter.VAR_POSITIONAL else "**") + p.name
                for p in inspect.signature(model.forward).parameters.values()
                if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    if variadic:  # the graphs would read its inputs under names the emitted forward does not bind
        graph["failure"] = f"forward takes {', '.join(variadic)}"
        log(f"not captured: {graph['failure']}")
        return graph
    unguarded = _unguarded(graph["inputs"])
    if unguarded:  # `forward(self, xs)` given a list of tensors: export flattens it, fx's guard would be its repr
        graph["failure"] = f"forward argument {', '.join(unguarded)} is no literal a guard can compare (tensors in a list)"
        log(f"not captured: {graph['failure']}")
        return graph
    python_state = _python_state(model)
    started = time.perf_counter()
    try:
        versions, before = _state_versions(model), _attribute_names(model)
        gm, runtime = trace(model, inputs)
        _check_python_state(model, python_state)
        _check_faithful_fx(model, versions)
        _check_no_state_writes(gm, model)
        propagate_shapes(gm, runtime)
        writer = FxGraphWriter(gm, model, module, matcher)
        nodes = writer.nodes()
        _check_no_folded_constants(before, nodes)
        specialised = model.training if reads_training_flag(model, inputs, gm) else None
        graph.update(captured="fx", nodes=nodes, output=writer.output(), specialisedTraining=specialised)
        log(f"captured with torch.fx in {time.perf_counter() - started:.2f}s: {len(graph['nodes'])} nodes")
        return graph
    except Exception as exc:  # noqa: BLE001 — fx's failure is a result, then export gets its turn
        fx_error = _one_line(exc)
        log(f"torch.fx failed: {fx_error}")
    started = time.perf_counter()
    try:
        names = [p.name for p in inspect.signature(model.forward).parameters.values()]
        program = export_program(model, inputs)
        _check_python_state(model, python_state)
        _check_faithful_export(program)
        inline_grad_mode_blocks(program.graph_module)
        ex_writer = ExportGraphWriter(program, names, matcher)
        # Whether export's graph read `self.training` is not probed (a second export costs seconds): it is taken
        # to depend on the mode it was exported in.
        graph.update(
            captured="export", nodes=ex_writer.nodes(), output=ex_writer.output(), specialisedTraining=model.training
        )
        log(f"captured with torch.export in {time.perf_counter() - started:.2f}s: {len(graph['nodes'])} nodes")
        return graph
    except Exception as exc:  # noqa: BLE001
        export_error = _one_line(exc)
        log(f"torch.export failed: {export_error}")
    graph["failure"] = f"torch.fx: {fx_error}; torch.export: {export_error}"
    return graph
