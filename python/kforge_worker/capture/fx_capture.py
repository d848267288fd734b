"""Capture with torch.fx: symbolic_trace with leaf modules, then ShapeProp on the meta device.

Recurrent layers and MultiheadAttention are leaves; so is any submodule fx cannot trace through (its
partial trace is abandoned and the module called as one node). Forward arguments that get_inputs()
does not pass, or that are None or plain Python values, are concrete: the graph is specialised to them.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import operator
import re
from typing import Any, Iterator

import torch
import torch.fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from .build import FactoriesOn
from .encode import Arg, tensor_meta
from .model_info import AttrMatcher
from .nodes import ArgEncoder, make_node, value_out
from .normalize import Facts, ParamRef, normalise_call, normalise_module
from .ops import LEAF_MODULE_TYPES, TRANSFORMER_MODULE_TYPES, OpSpec, function_spec, method_spec, module_spec, resolve_dotted


class CaptureTracer(torch.fx.Tracer):
    def __init__(self) -> None:
        super().__init__()
        self.untraceable: set[str] = set()
        self.abandoned: set[torch.fx.Node] = set()
        # A buffer read in forward is a graph input, as a parameter is: a causal mask sliced by a traced size
        # (`self.bias[:, :, :T, :T]`) fails on the real tensor and would leave the whole submodule to PyTorch.
        self.proxy_buffer_attributes = True

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return (
            isinstance(m, LEAF_MODULE_TYPES)
            or module_qualified_name in self.untraceable
            or super().is_leaf_module(m, module_qualified_name)
        )

    def call_module(self, m: nn.Module, forward: Any, args: tuple, kwargs: dict) -> Any:
        qualname = self.path_of_module(m)
        if isinstance(m, TRANSFORMER_MODULE_TYPES) and m.training:
            raise NotImplementedError(f"{qualname} ({type(m).__name__}) in training mode: export traces it through")
        if self.is_leaf_module(m, qualname):
            return super().call_module(m, forward, args, kwargs)
        before = set(self.graph.nodes)
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:  # noqa: BLE001 — fx cannot trace this submodule: call it as one node
            self.abandoned.update(n for n in self.graph.nodes if n not in before)
            self.untraceable.add(qualname)
            return self.create_proxy("call_module", qualname, args, kwargs)


_ASSERTS = {torch._assert, getattr(torch.fx._symbolic_trace, "_assert_is_none", None)} - {None}
_PLAIN = (bool, int, float, str, type(None))


def concrete_args(model: nn.Module, inputs: list[Any]) -> dict[str, Any]:
    concrete: dict[str, Any] = {}
    params = [
        p for p in inspect.signature(model.forward).parameters.values()
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    for i, p in enumerate(params):
        if i < len(inputs):
            if isinstance(inputs[i], _PLAIN):
                concrete[p.name] = inputs[i]
        else:
            concrete[p.name] = None if p.default is inspect.Parameter.empty else p.default
    # get_inputs() passes positionally: a keyword-only parameter (`def forward(self, x, *, scale=2.0)`) is its default.
    for p in inspect.signature(model.forward).parameters.values():
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            concrete[p.name] = None if p.default is inspect.Parameter.empty else p.default
    return concrete


def _drop_specialisation_checks(gm: torch.fx.GraphModule, real_inputs: set[str], tracer: CaptureTracer) -> None:
    """Removes the asserts fx adds for concrete arguments, their placeholders (named `<arg>_<n>` by fx), and
    abandoned partial traces."""
    graph = gm.graph
    for node in reversed(list(graph.nodes)):
        if node.op == "call_function" and node.target in _ASSERTS:
            graph.erase_node(node)
    changed = True
    while changed:
        changed = False
        for node in reversed(list(graph.nodes)):
            if node.users:
                continue
            concrete_eq = node.op == "call_function" and node.target is operator.eq and any(
                isinstance(a, torch.fx.Node) and a.op == "placeholder" and a.target not in real_inputs for a in node.args
            )
            if (node.op == "placeholder" and node.target not in real_inputs) or concrete_eq or node in tracer.abandoned:
                graph.erase_node(node)
                changed = True
    gm.recompile()


#: Factories taking their size as varargs (`torch.ones(n, n)`).
_VARARG_SIZE_FACTORIES = ("ones", "zeros", "empty", "rand", "randn")


@contextlib.contextmanager
def _proxy_sizes_as_tuples() -> Iterator[None]:
    """torch.ones(n, n) with n = x.size(-1) fails under fx (the argument parser takes several Proxies for the
    one `size` parameter and raises a TypeError); torch.ones((n, n)) traces. While tracing, such a call is
    passed its sizes as one tuple: the same call, recorded on the builtin itself."""

    def packing(factory: Any) -> Any:
        @functools.wraps(factory)
        def call(*args: Any, **kwargs: Any) -> Any:
            if len(args) > 1 and any(isinstance(a, torch.fx.Proxy) for a in args):
                return factory(tuple(args), **kwargs)
            return factory(*args, **kwargs)

        return call

    originals = {name: getattr(torch, name) for name in _VARARG_SIZE_FACTORIES}
    try:
        for name, factory in originals.items():
            setattr(torch, name, packing(factory))
        yield
    finally:
        for name, factory in originals.items():
            setattr(torch, name, factory)


#: Python's augmented assignments and the functions that do them in place on a tensor.
_INPLACE_DUNDERS = {
    "__iadd__": operator.iadd, "__isub__": operator.isub, "__imul__": operator.imul,
    "__itruediv__": operator.itruediv, "__ifloordiv__": operator.ifloordiv, "__imod__": operator.imod,
    "__ipow__": operator.ipow, "__imatmul__": operator.imatmul, "__iand__": operator.iand, "__ior__": operator.ior,
    "__ixor__": operator.ixor, "__ilshift__": operator.ilshift, "__irshift__": operator.irshift,
}


@contextlib.contextmanager
def _augmented_assignments_recorded() -> Iterator[None]:
    """fx's Proxy has no `__iadd__`, so Python runs `x += y` as `x = x + y`: a forward input, a buffer or a view
    of either written in place by the reference was left untouched by a graph that records an add. While
    tracing, an augmented assignment on a Proxy records its in-place operator (`operator.iadd(x, y)`), as
    torch.Tensor runs it; on a Python number the operator computes the same value as the plain one."""

    def recording(op: Any) -> Any:
        def call(self: torch.fx.Proxy, other: Any) -> Any:
            return self.tracer.create_proxy("call_function", op, (self, other), {})

        return call

    try:
        for name, op in _INPLACE_DUNDERS.items():
            setattr(torch.fx.Proxy, name, recording(op))
        yield
    finally:
        for name in _INPLACE_DUNDERS:
            delattr(torch.fx.Proxy, name)


#: Factories making a tensor from Python data (`torch.tensor(q.size(-1), dtype=torch.float32)`).
_DATA_FACTORIES = ("tensor", "as_tensor", "scalar_tensor")


@contextlib.contextmanager
def _data_factories_recorded() -> Iterator[None]:
    """`torch.tensor(d)` with d = q.size(-1) fails under fx: the argument parser reads the Proxy as array data
    (`__cuda_array_interface__` must be a dict) before any __torch_function__ sees it, and the whole forward
    lost its capture (`/ torch.sqrt(torch.tensor(q.size(-1)))`, attention as LLMs write it). While tracing, a
    call given a Proxy anywhere in its arguments is recorded on the builtin itself, as fx records any call."""

    def recording(factory: Any) -> Any:
        @functools.wraps(factory)
        def call(*args: Any, **kwargs: Any) -> Any:
            leaves = torch.utils._pytree.tree_leaves((args, kwargs))
            proxy = next((a for a in leaves if isinstance(a, torch.fx.Proxy)), None)
            if proxy is not None:
                return proxy.tracer.create_proxy("call_function", factory, args, kwargs)
            return factory(*args, **kwargs)

        return call

    originals = {name: getattr(torch, name) for name in _DATA_FACTORIES}
    try:
        for name, factory in originals.items():
            setattr(torch, name, recording(factory))
        yield
    finally:
        for name, factory in originals.items():
            setattr(torch, name, factory)


@contextlib.contextmanager
def _refusing_autocast() -> Iterator[None]:
    """fx runs `with torch.autocast(...)` at trace time and records none of it: its graph would compute in the
    dtypes outside the block (a Linear in fp32 where the reference's runs in bf16 on the GPU). Entering
    autocast while tracing fails the trace, enabled or not (on a machine without the device, autocast disables
    itself)."""
    autocast = torch.amp.autocast_mode.autocast
    original = autocast.__enter__

    def enter(self: Any) -> Any:
        raise RuntimeError("forward enters torch.autocast, which fx's graph does not record")

    autocast.__enter__ = enter
    try:
        yield
    finally:
        autocast.__enter__ = original


@contextlib.contextmanager
def _buffers_kept(model: nn.Module) -> Iterator[None]:
    """Buffers are proxies while tracing, so `self.steps += 1` or `self.v = self.v * 0.9` stores a Proxy in the
    model and records no write: the model's buffers are put back, and a forward that reassigns one fails fx's
    capture (the emitted forward would never update it)."""
    before = [(m, name, t) for m in model.modules() for name, t in m._buffers.items()]
    try:
        yield
    finally:
        replaced = [name for m, name, t in before if m._buffers.get(name) is not t]
        for m, name, t in before:
            m._buffers[name] = t
    if replaced:
        raise RuntimeError(f"forward assigns buffers {', '.join(replaced)}")


def trace(model: nn.Module, inputs: list[Any]) -> tuple[torch.fx.GraphModule, list[Any]]:
    """The traced module and the runtime arguments of its remaining placeholders."""
    concrete = concrete_args(model, inputs)
    tracer = CaptureTracer()
    with _proxy_sizes_as_tuples(), _data_factories_recorded(), _augmented_assignments_recorded(), \
            _refusing_autocast(), _buffers_kept(model):
        graph = tracer.trace(model, concrete_args=concrete or None)
    gm = torch.fx.GraphModule(tracer.root, graph, type(model).__name__)
    names = [p.name for p in inspect.signature(model.forward).parameters.values()]
    _drop_specialisation_checks(gm, set(names) - set(concrete), tracer)
    by_name = dict(zip(names, inputs))
    runtime = [by_name.get(n.target) for n in gm.graph.nodes if n.op == "placeholder"]
    return gm, runtime


_CONSTANT_NAME = re.compile(r"_tensor_constant\d+")


def reads_training_flag(model: nn.Module, inputs: list[Any], gm: torch.fx.GraphModule) -> bool:
    """Whether fx's graph depends on the modules' train/eval flags: fx evaluates `self.training` at trace time
    (`F.dropout(x, training=self.training)`, an `if self.training:` branch), so such a graph holds the mode it
    was traced in. Traced again in the other mode, it reads differently (or does not trace: counted as
    depending). Every module's flag is restored."""
    flags = [(m, m.training) for m in model.modules()]
    try:
        model.train(not model.training)
        other, _ = trace(model, inputs)
        # fx numbers the constants it attaches to the model: the second trace's are named on from the first's
        return _CONSTANT_NAME.sub("_tensor_constant", other.code) != _CONSTANT_NAME.sub("_tensor_constant", gm.code)
    except Exception:  # noqa: BLE001 — the other mode's forward does not trace: it differs
        return True
    finally:
        for module, training in flags:
            module.training = training


class _SizesProp(ShapeProp):
    """ShapeProp that also keeps the sizes a node computes (`x.shape[-1:]`, `x.size(1)`) as `kf_sizes`: the
    shapes are the captured inputs', so these are the values at the captured shapes."""

    def fetch_args_kwargs_from_env(self, n: torch.fx.Node) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A 0-d CPU tensor (`torch.tensor(-1e4)` built in forward, a constant fx attached) joins tensors of
        any device on a GPU, but some meta kernels refuse it (masked_fill checks its value's device): beside
        meta tensors it propagates on meta. A 0-d tensor's dtype promotes by its dims, not its device, so
        every shape and dtype is the one the GPU computes."""
        args, kwargs = super().fetch_args_kwargs_from_env(n)
        leaves = [v for v in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(v, torch.Tensor)]
        if not any(t.device.type == "meta" for t in leaves):
            return args, kwargs

        def to_meta(v: Any) -> Any:
            if isinstance(v, torch.Tensor) and v.dim() == 0 and v.device.type == "cpu":
                return v.to("meta")
            return v

        return torch.utils._pytree.tree_map(to_meta, (args, kwargs))

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if isinstance(result, int) and not isinstance(result, bool):
            n.meta["kf_sizes"] = result
        elif isinstance(result, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool) for v in result):
            n.meta["kf_sizes"] = tuple(result)
        return result


    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        try:
            return super().call_function(target, args, kwargs)
        except RuntimeError as exc:
            return _on_cpu(lambda a, k: target(*a, **k), args, kwargs, exc)

    def call_method(self, target: Any, args: tuple, kwargs: dict) -> Any:
        try:
            return super().call_method(target, args, kwargs)
        except RuntimeError as exc:
            return _on_cpu(lambda a, k: getattr(a[0], target)(*a[1:], **k), args, kwargs, exc)


def _on_cpu(call: Any, args: tuple, kwargs: dict, exc: RuntimeError) -> Any:
    """A function that reads a value of its input (gaussian_nll_loss's `torch.any(var < 0)` check) cannot run on
    meta: it runs on the CPU, once on zeros and once on ones of its inputs' shapes, and gives meta results of the
    shapes both agree on. Shapes that depend on the values (one_hot without num_classes) differ between the two
    and keep the meta failure, as do large inputs and module calls (their parameters are meta)."""
    if "cannot be called on meta tensors" not in str(exc):
        raise exc
    leaves = [v for v in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(v, torch.Tensor)]
    if sum(t.numel() * t.element_size() for t in leaves) > _CPU_RETRY_BYTES:
        raise exc
    runs = []
    for fill in (0, 1):
        a, k = torch.utils._pytree.tree_map(
            lambda v: torch.full_like(v, fill, device="cpu") if isinstance(v, torch.Tensor) and v.is_meta else v,
            (args, kwargs),
        )
        with torch._C.DisableTorchFunction():
            try:
                runs.append(call(a, k))
            except Exception:  # noqa: BLE001 — the CPU refuses these values too: the meta failure stands
                raise exc from None
    shapes = [[(v.shape, v.dtype) for v in torch.utils._pytree.tree_leaves(r) if isinstance(v, torch.Tensor)] for r in runs]
    if shapes[0] != shapes[1]:
        raise exc
    return torch.utils._pytree.tree_map(
        lambda v: torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta") if isinstance(v, torch.Tensor) else v,
        runs[0],
    )


#: The most input bytes a node that cannot run on meta is run with on the CPU to learn its output's shape.
_CPU_RETRY_BYTES = 1 << 28


def propagate_shapes(gm: torch.fx.GraphModule, runtime: list[Any]) -> None:
    """Under no_grad, as the harness calls the reference: some ops refuse a parameter that requires grad as
    an argument they are not differentiable in (binary_cross_entropy_with_logits' pos_weight), which no value
    of the forward depends on."""
    with FactoriesOn("meta"), torch.no_grad():
        _SizesProp(gm).propagate(*runtime)


def _meta(tm: TensorMetadata) -> dict[str, Any]:
    return tensor_meta(tm.shape, tm.dtype, tm.stride)


def node_out(node: torch.fx.Node) -> dict[str, Any]:
    tm = node.meta.get("tensor_meta")
    if isinstance(tm, TensorMetadata):
        return {"t": "tensor", "meta": _meta(tm)}
    if isinstance(tm, (tuple, list)):
        return {"t": "tuple", "items": [_meta(i) if isinstance(i, TensorMetadata) else None for i in tm]}
    kind = node.meta.get("type")
    return value_out(kind.__name__ if isinstance(kind, type) else "unknown")


def callable_expression(target: Any, problem_module: Any) -> str:
    """A Python expression naming target in the problem's namespace after `import torch`."""
    from torch.fx.node import _get_qualified_name

    try:
        name = _get_qualified_name(target)
    except Exception:  # noqa: BLE001
        name = getattr(target, "__name__", repr(target))
    if name.startswith("_operator."):
        name = name[1:]
    if resolve_dotted(name) is target or "." not in name:
        return name
    for key, value in vars(problem_module).items():
        if value is target:
            return key
    return name


#: The most elements of a tensor literal (`torch.tensor([1., 2.])` in forward) written into the emitted forward.
LITERAL_MAX = 64


class FxGraphWriter:
    def __init__(self, gm: torch.fx.GraphModule, model: nn.Module, problem_module: Any, matcher: AttrMatcher) -> None:
        self.gm = gm
        self.model = model
        self.problem_module = problem_module
        self.param_paths = {p for p, _ in model.named_parameters(remove_duplicate=False)} | {
            b for b, _ in model.named_buffers(remove_duplicate=False)
        }
        self.enc = ArgEncoder(self._ref, matcher)
        self.facts = Facts(is_tensor=self._is_tensor, rank=self._rank, dtype=self._dtype, sizes=self._sizes)

    def _ref(self, value: Any) -> Arg | None:
        if not isinstance(value, torch.fx.Node):
            return None
        if value.op == "placeholder":
            return {"t": "node", "id": str(value.target)}  # the forward's argument name
        if value.op == "get_attr" and value.target in self.param_paths:
            return {"t": "param", "path": value.target}
        return {"t": "node", "id": value.name}

    def _is_tensor(self, value: Any) -> bool:
        if isinstance(value, ParamRef):
            return True
        return isinstance(value, torch.fx.Node) and isinstance(value.meta.get("tensor_meta"), TensorMetadata)

    def _rank(self, value: Any) -> int | None:
        tm = value.meta.get("tensor_meta") if isinstance(value, torch.fx.Node) else None
        return len(tm.shape) if isinstance(tm, TensorMetadata) else None

    def _dtype(self, value: Any) -> torch.dtype | None:
        tm = value.meta.get("tensor_meta") if isinstance(value, torch.fx.Node) else None
        return tm.dtype if isinstance(tm, TensorMetadata) else None

    def _sizes(self, value: Any) -> Any:
        return value.meta.get("kf_sizes") if isinstance(value, torch.fx.Node) else None

    def _raw(self, value: Any) -> Any:
        """Parameters read with get_attr become ParamRefs before normalisation."""
        if isinstance(value, torch.fx.Node) and value.op == "get_attr" and value.target in self.param_paths:
            return ParamRef(value.target)
        if isinstance(value, (list, tuple)):
            return type(value)(self._raw(v) for v in value)
        if isinstance(value, dict):
            return {k: self._raw(v) for k, v in value.items()}
        return value

    def _literal(self, value: Any) -> torch.Tensor | None:
        """A tensor fx built while tracing from Python values alone (`torch.tensor(0.0)`, `torch.ones(3)`), which
        it holds as a constant: off meta, where the model's state and the inputs are, and small."""
        if not isinstance(value, torch.fx.Node) or value.op != "get_attr" or value.target in self.param_paths:
            return None
        tensor = getattr(self.gm, str(value.target), None)
        if isinstance(tensor, torch.Tensor) and not tensor.is_meta and tensor.numel() <= LITERAL_MAX:
            return tensor
        return None

    def _number(self, value: Any) -> Any:
        """A 0-d tensor literal as its Python number (as an operand it broadcasts and promotes like one)."""
        tensor = self._literal(value)
        return tensor.item() if tensor is not None and tensor.dim() == 0 else value

    def nodes(self) -> list[dict[str, Any]]:
        out = []
        for node in self.gm.graph.nodes:
            if node.op in ("placeholder", "output") or (node.op == "get_attr" and node.target in self.param_paths):
                continue
            out.append(self._node(node))
        return out

    @staticmethod
    def _scope(node: torch.fx.Node) -> set[str]:
        """The modules whose forward made this call: the root and the stack fx recorded (`block.relu@1` is the
        second call of block.relu)."""
        return {"", *(re.sub(r"@\d+$", "", str(path)) for path in node.meta.get("nn_module_stack", {}))}

    def _node(self, node: torch.fx.Node) -> dict[str, Any]:
        self.enc.scope = self._scope(node)
        args = [self._raw(a) for a in node.args]
        kwargs = {k: self._raw(v) for k, v in node.kwargs.items()}
        module = method = None
        if node.op == "call_module":
            module = self.gm.get_submodule(node.target)
            spec = module_spec(module)
            spec, bound = normalise_module(module, node.target, spec, args, kwargs, self.facts)
            target = node.target
        elif node.op == "call_function":
            spec = function_spec(node.target)
            spec, bound = normalise_call(spec, args, kwargs, self.facts, self._number)
            target = callable_expression(node.target, self.problem_module)
        elif node.op == "call_method":
            method = node.target
            spec, bound = normalise_call(method_spec(method), args, kwargs, self.facts, self._number)
            target = method
        elif (literal := self._literal(node)) is not None:  # rebuilt in forward, as the reference builds it
            args, kwargs = [literal.tolist()], {"dtype": literal.dtype}
            spec, bound = normalise_call(function_spec(torch.tensor), args, kwargs, self.facts)
            return make_node(
                node_id=node.name, kind="call_function", target="torch.tensor", args=args, kwargs=kwargs,
                spec=spec, bound=bound, out=node_out(node), enc=self.enc,
            )
        else:  # get_attr of a plain tensor attribute
            spec, bound, target = OpSpec("get_attr"), None, node.target
        return make_node(
            node_id=node.name, kind=node.op, target=str(target), args=args, kwargs=kwargs, spec=spec,
            bound=bound, out=node_out(node), enc=self.enc, module=module, method=method,
        )

    def output(self) -> Arg:
        out_node = next(n for n in self.gm.graph.nodes if n.op == "output")
        return self.enc(self._raw(out_node.args[0]), explicit=False)
