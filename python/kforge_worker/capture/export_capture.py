"""Fallback capture with torch.export (non-strict) on meta, for forwards fx cannot trace (asserts on
shapes, sizes used as ints). Nodes are ATen ops, targets `torch.ops.aten.<op>.<overload>`; their
arguments bind through the op's own schema (`self` read as `input`) and then the same fix-ups as fx's."""

from __future__ import annotations

import inspect
import operator
from typing import Any

import torch
import torch.nn as nn

from .build import FactoriesOn
from .encode import Arg, meta_of_tensor
from .model_info import AttrMatcher
from .nodes import ArgEncoder, make_node, value_out
from .normalize import Facts, ParamRef, finish, refine
from .ops import UNKNOWN, OpSpec, aten_spec
from .signatures import Bound


def export_program(model: nn.Module, inputs: list[Any]) -> Any:
    if not hasattr(torch, "export"):
        raise RuntimeError("torch.export is not available in this torch")
    names = [p.name for p in inspect.signature(model.forward).parameters.values()]
    args = tuple(inputs[: len(names)])
    try:
        with FactoriesOn("meta"):
            return torch.export.export(model, args, strict=False)
    except Exception:  # noqa: BLE001 — retry without redirecting factories (the mode can confuse export)
        return torch.export.export(model, args, strict=False)


# Higher-order ops whose body runs as written whatever their flag: grad mode changes no value, so their
# ops are inlined. Any other (autocast changes dtypes, control flow chooses) is refused.
_INLINED_HIGHER_ORDER = ("wrap_with_set_grad_enabled",)


def inline_grad_mode_blocks(gm: torch.fx.GraphModule) -> None:
    """`with torch.no_grad():` in a forward exports as a higher-order op calling a submodule graph, which the
    emitted forward has neither of: the body's nodes take the call's place, its outputs its getitems'."""
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op == "get_attr" and isinstance(getattr(gm, str(node.target), None), torch.fx.GraphModule):
            continue  # a body, read by its call below
        if node.op != "call_function" or not isinstance(node.target, torch._ops.HigherOrderOperator):
            continue
        if node.target.name() not in _INLINED_HIGHER_ORDER:
            raise RuntimeError(f"forward calls the higher-order op {node.target.name()}")
        body_ref = node.args[1]
        body = getattr(gm, str(body_ref.target))
        inline_grad_mode_blocks(body)
        env: dict[torch.fx.Node, Any] = dict(
            zip([n for n in body.graph.nodes if n.op == "placeholder"], node.args[2:])
        )
        outputs: Any = ()
        with graph.inserting_before(node):
            for inner in body.graph.nodes:
                if inner.op == "placeholder":
                    continue
                if inner.op == "output":
                    outputs = torch.fx.map_arg(inner.args[0], lambda a: env[a])
                    continue
                if inner.op == "get_attr":
                    raise RuntimeError("a grad-mode block reads its own attributes")
                env[inner] = graph.node_copy(inner, lambda a: env[a])
        for user in list(node.users):
            if user.target is not operator.getitem:
                raise RuntimeError("a grad-mode block's result is used whole")
            user.replace_all_uses_with(outputs[user.args[1]])
            graph.erase_node(user)
        graph.erase_node(node)
        if not body_ref.users:
            graph.erase_node(body_ref)
    leftover = [n.target for n in graph.nodes
                if n.op == "get_attr" and isinstance(getattr(gm, str(n.target), None), torch.fx.GraphModule)]
    if leftover:
        raise RuntimeError(f"forward reads graph submodules {', '.join(map(str, leftover))}")


def _aten_bound(op: Any, args: tuple, kwargs: dict) -> Bound | None:
    schema = getattr(op, "_schema", None)
    if schema is None:
        return None
    bound = Bound()
    positional = [a for a in schema.arguments if not a.kwarg_only]
    for arg, value in zip(positional, args):
        bound["input" if arg.name == "self" else arg.name] = (value, True)
    for arg in schema.arguments:
        name = "input" if arg.name == "self" else arg.name
        if arg.name in kwargs:
            bound[name] = (kwargs[arg.name], True)
        elif name not in bound and arg.has_default_value():
            bound[name] = (arg.default_value, False)
    return bound


def _out(value: Any) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return {"t": "tensor", "meta": meta_of_tensor(value)}
    if isinstance(value, (tuple, list)):
        return {"t": "tuple", "items": [meta_of_tensor(v) if isinstance(v, torch.Tensor) else None for v in value]}
    return value_out(type(value).__name__ if value is not None else "unknown")


class ExportGraphWriter:
    def __init__(self, program: Any, input_names: list[str], matcher: AttrMatcher) -> None:
        self.program = program
        self.graph = program.graph
        sig = program.graph_signature
        self.params: dict[str, str] = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
        self.constants: dict[str, str] = dict(getattr(sig, "inputs_to_lifted_tensor_constants", {}) or {})
        self.user_inputs = dict(zip(sig.user_inputs, input_names))
        self.enc = ArgEncoder(self._ref, matcher)
        self.facts = Facts(is_tensor=self._is_tensor, rank=self._rank, dtype=self._dtype)

    def _ref(self, value: Any) -> Arg | None:
        if not isinstance(value, torch.fx.Node):
            return None
        if value.name in self.params:
            return {"t": "param", "path": self.params[value.name]}
        if value.name in self.user_inputs:
            return {"t": "node", "id": self.user_inputs[value.name]}
        return {"t": "node", "id": value.name}

    def _raw(self, value: Any) -> Any:
        if isinstance(value, torch.fx.Node) and value.name in self.params:
            return ParamRef(self.params[value.name])
        if isinstance(value, (list, tuple)):
            return type(value)(self._raw(v) for v in value)
        return value

    def _is_tensor(self, value: Any) -> bool:
        return isinstance(value, ParamRef) or (
            isinstance(value, torch.fx.Node) and isinstance(value.meta.get("val"), torch.Tensor)
        )

    def _rank(self, value: Any) -> int | None:
        val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        return val.dim() if isinstance(val, torch.Tensor) else None

    def _dtype(self, value: Any) -> torch.dtype | None:
        val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        return val.dtype if isinstance(val, torch.Tensor) else None

    def nodes(self) -> list[dict[str, Any]]:
        out = []
        for node in self.graph.nodes:
            if node.op == "placeholder" and node.name in self.constants:
                out.append(self._constant(node))
            elif node.op in ("call_function", "call_method", "get_attr"):
                out.append(self._node(node))
        return out

    def _constant(self, node: torch.fx.Node) -> dict[str, Any]:
        return make_node(
            node_id=node.name, kind="get_attr", target=self.constants[node.name], args=[], kwargs={},
            spec=OpSpec("get_attr"), bound=None, out=_out(node.meta.get("val")), enc=self.enc,
        )

    def _node(self, node: torch.fx.Node) -> dict[str, Any]:
        args = [self._raw(a) for a in node.args]
        kwargs = {k: self._raw(v) for k, v in node.kwargs.items()}
        target = node.target
        if isinstance(target, torch._ops.OpOverload):
            base, overload = target._schema.name.split("::")[-1], target._overloadname
            spec = aten_spec(base)
            if spec.op in ("max", "min"):
                spec = {"dim": OpSpec(f"{spec.op}_dim", f"{spec.op}_dim")}.get(overload) or refine(spec, args, kwargs, self.facts)
            bound = _aten_bound(target, tuple(args), kwargs) if spec.op != "unknown" else None
            if spec.reflected and bound is not None and "other" in bound:
                bound["input"], bound["other"] = bound["other"], bound["input"]
            spec, bound = finish(spec, bound, self.facts)
            expression = f"torch.ops.{target.namespace}.{base}.{overload}"
        elif target is operator.getitem:
            spec, bound, expression = OpSpec("getitem"), Bound(input=(args[0], True), index=(args[1], True)), "operator.getitem"
        else:
            spec, bound, expression = UNKNOWN, None, getattr(target, "__name__", str(target))
        return make_node(
            node_id=node.name, kind="call_function" if node.op != "get_attr" else "get_attr", target=expression,
            args=args, kwargs=kwargs, spec=spec, bound=bound, out=_out(node.meta.get("val")), enc=self.enc,
        )

    def output(self) -> Arg:
        out_node = next(n for n in self.graph.nodes if n.op == "output")
        specs = self.program.graph_signature.output_specs
        values = list(out_node.args[0])
        user = [self._raw(v) for v, s in zip(values, specs) if s.kind.name == "USER_OUTPUT"]
        return self.enc(user[0] if len(user) == 1 else tuple(user), explicit=False)
