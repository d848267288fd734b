"""Capture (python -m kforge_worker --capture): canonical ops, normalised calls, shapes on meta, params,
source split, the export / none fallbacks, and every built-in problem against the Graph JSON Schema."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO, assert_valid, run_worker

from kforge_worker.capture import ProblemError, capture_problem

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def capture_source(tmp_path: Path, source: str) -> dict[str, Any]:
    """Captures a problem file made of HEADER and `source` (dedented); the graph must fit the Graph schema."""
    path = tmp_path / "problem.py"
    path.write_text(HEADER + textwrap.dedent(source))
    graph = capture_problem(str(path), log=lambda _m: None)
    assert_valid(json.loads(json.dumps(graph, allow_nan=False)), "Graph")
    return graph


def capture_text(tmp_path: Path, body: str, inputs: str = "[torch.rand(4, 8)]", init: str = "[]") -> dict[str, Any]:
    return capture_source(
        tmp_path,
        textwrap.dedent(body) + f"\n\ndef get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return {init}\n",
    )


def model(forward: str, init: str = "pass", init_args: str = "") -> str:
    return (
        f"class Model(nn.Module):\n    def __init__(self{init_args}):\n        super().__init__()\n"
        + textwrap.indent(textwrap.dedent(init), " " * 8)
        + "\n\n    def forward(self, x):\n"
        + textwrap.indent(textwrap.dedent(forward), " " * 8)
    )


def const(value: Any) -> dict[str, Any]:
    pytype = {bool: "bool", int: "int", float: "float", str: "str", type(None): "none"}[type(value)]
    return {"t": "const", "pytype": pytype, "value": value}


def ints(*values: int) -> dict[str, Any]:
    return {"t": "list", "kind": "list", "items": [const(v) for v in values]}


def ops(graph: dict[str, Any]) -> list[str]:
    return [n["op"] for n in graph["nodes"]]


def node(graph: dict[str, Any], op: str) -> dict[str, Any]:
    found = [n for n in graph["nodes"] if n["op"] == op]
    assert len(found) == 1, f"{op}: {ops(graph)}"
    return found[0]


@pytest.mark.parametrize(
    "init, forward, kind",
    [
        ("self.act = nn.ReLU()", "return self.act(x)", "call_module"),
        ("pass", "return F.relu(x)", "call_function"),
        ("pass", "return torch.relu(x)", "call_function"),
        ("pass", "return x.relu()", "call_method"),
    ],
)
def test_every_form_of_an_activation_reads_the_same(tmp_path: Path, init: str, forward: str, kind: str) -> None:
    graph = capture_text(tmp_path, model(forward, init))
    assert graph["captured"] == "fx"
    (relu,) = graph["nodes"]
    assert (relu["op"], relu["kind"], relu["fn"]) == ("relu", kind, {"input": {"t": "node", "id": "x"}})
    assert relu["out"] == {"t": "tensor", "meta": {"shape": [4, 8], "dtype": "float32", "stride": [8, 1]}}
    assert graph["output"] == {"t": "node", "id": relu["id"]}


@pytest.mark.parametrize(
    "init, forward, op, fn",
    [
        # a module's int and float hyper-parameters name their attribute: ModelNew reads floats at run time and
    # guards ints (a dim, num_groups)
        ("self.a = nn.LeakyReLU(0.2)", "return self.a(x)", "leaky_relu", {"negative_slope": {**const(0.2), "attr": "a.negative_slope"}}),
        ("pass", "return F.leaky_relu(x)", "leaky_relu", {"negative_slope": const(0.01)}),
        ("self.a = nn.GELU(approximate='tanh')", "return self.a(x)", "gelu", {"approximate": const("tanh")}),
        ("pass", "return torch._C._nn.gelu(x)", "gelu", {"approximate": const("none")}),
        ("self.a = nn.ReLU6()", "return self.a(x)", "hardtanh",
         {"min_val": {**const(0.0), "attr": "a.min_val"}, "max_val": {**const(6.0), "attr": "a.max_val"}}),
        ("pass", "return F.relu6(x)", "hardtanh", {"min_val": const(0.0), "max_val": const(6.0)}),
        ("pass", "return torch.clamp(x, min=0.5)", "clamp", {"min": const(0.5), "max": const(None)}),
        ("pass", "return x.clip(-1, 1)", "clamp", {"min": const(-1), "max": const(1)}),
        ("self.a = nn.Softplus(beta=2)", "return self.a(x)", "softplus",
         {"beta": {**const(2), "attr": "a.beta"}, "threshold": {**const(20.0), "attr": "a.threshold"}}),
        ("self.a = nn.ELU(alpha=0.5)", "return self.a(x)", "elu", {"alpha": {**const(0.5), "attr": "a.alpha"}}),
        ("self.a = nn.Softmax(dim=-1)", "return self.a(x)", "softmax", {"dim": {**const(-1), "attr": "a.dim"}, "dtype": const(None)}),
        ("pass", "return x.softmax(1)", "softmax", {"dim": const(1), "dtype": const(None)}),
        ("pass", "return torch.log_softmax(x, dim=0)", "log_softmax", {"dim": const(0), "dtype": const(None)}),
        ("pass", "return torch.add(x, x, alpha=2)", "add", {"other": {"t": "node", "id": "x"}, "alpha": const(2)}),
        ("pass", "return x / 3", "div", {"other": const(3), "rounding_mode": const(None)}),
        ("pass", "return x // 3", "div", {"other": const(3), "rounding_mode": const("floor")}),
        ("pass", "return x ** 2", "pow", {"exponent": const(2)}),
    ],
)
def test_calls_are_normalised_with_defaults(tmp_path: Path, init: str, forward: str, op: str, fn: dict) -> None:
    graph = capture_text(tmp_path, model(forward, init))
    found = node(graph, op)
    assert found["fn"] == {"input": {"t": "node", "id": "x"}, **fn}


def test_reflected_subtraction_puts_the_constant_first(tmp_path: Path) -> None:
    graph = capture_text(tmp_path, model("return 2 - x"))
    assert node(graph, "sub")["fn"] == {"input": const(2), "other": {"t": "node", "id": "x"}, "alpha": const(1)}


@pytest.mark.parametrize(
    "forward, op, fn, shape",
    [
        ("return x.sum(1)", "sum", {"dim": ints(1), "keepdim": const(False), "dtype": const(None)}, [4]),
        ("return torch.mean(x, dim=(0, 1), keepdim=True)", "mean", {"dim": ints(0, 1), "keepdim": const(True), "dtype": const(None)}, [1, 1]),
        ("return x.mean()", "mean", {"dim": const(None), "keepdim": const(False), "dtype": const(None)}, []),
        ("return torch.amax(x, 1)", "amax", {"dim": ints(1), "keepdim": const(False)}, [4]),
        ("return torch.logsumexp(x, dim=1)", "logsumexp", {"dim": ints(1), "keepdim": const(False)}, [4]),
        ("return torch.argmax(x, dim=1)", "argmax", {"dim": const(1), "keepdim": const(False)}, [4]),
        ("return torch.var(x, 1, unbiased=False)", "var", {"dim": ints(1), "keepdim": const(False), "correction": const(0)}, [4]),
        ("return x.std(dim=1)", "std", {"dim": ints(1), "keepdim": const(False), "correction": const(1)}, [4]),
        ("return torch.norm(x, p=2, dim=1)", "vector_norm", {"ord": const(2), "dim": ints(1), "keepdim": const(False), "dtype": const(None)}, [4]),
        ("return torch.norm(x)", "vector_norm", {"ord": const(2), "dim": const(None), "keepdim": const(False), "dtype": const(None)}, []),
        ("return torch.cumsum(x, dim=1)", "cumsum", {"dim": const(1), "dtype": const(None)}, [4, 8]),
        ("return torch.max(x)", "max", {}, []),
        ("return torch.max(x, x)", "maximum", {"other": {"t": "node", "id": "x"}}, [4, 8]),
    ],
)
def test_reductions_normalise_their_dims(tmp_path: Path, forward: str, op: str, fn: dict, shape: list[int]) -> None:
    graph = capture_text(tmp_path, model(forward))
    found = node(graph, op)
    assert found["fn"] == {"input": {"t": "node", "id": "x"}, **fn}
    assert found["out"]["meta"]["shape"] == shape


@pytest.mark.parametrize(
    "forward, op, fn",
    [
        # torch.norm(x, p="fro") is Frobenius over every dim: vector_norm with ord 2, as torch.norm computes it.
        ("return torch.norm(x, p='fro')", "vector_norm", {"ord": const(2), "dim": const(None)}),
        ("return torch.norm(x, p='fro', dim=(0, 1))", "vector_norm", {"ord": const(2), "dim": ints(0, 1)}),
        ("return torch.norm(x, 1, 1)", "vector_norm", {"ord": const(1), "dim": ints(1)}),
        ("return x.norm(p=3.0, dim=-1)", "vector_norm", {"ord": const(3.0), "dim": ints(-1)}),
        ("return torch.linalg.norm(x, dim=1)", "vector_norm", {"ord": const(2), "dim": ints(1)}),
        # the nuclear norm (and linalg.norm's matrix orders) without dims: a matrix norm over every dim
        ("return torch.norm(x, p='nuc')", "matrix_norm", {"ord": const("nuc"), "dim": ints(0, 1)}),
        ("return torch.linalg.norm(x, ord=2)", "matrix_norm", {"ord": const(2), "dim": ints(0, 1)}),
    ],
)
def test_norms_read_as_vector_or_matrix_norms(tmp_path: Path, forward: str, op: str, fn: dict) -> None:
    graph = capture_text(tmp_path, model(forward))
    found = node(graph, op)
    assert found["fn"] == {"input": {"t": "node", "id": "x"}, **fn, "keepdim": const(False), "dtype": const(None)}


def loss_model(forward: str, init: str = "pass") -> str:
    """A Model whose forward takes (x, y): predictions and targets."""
    return model(forward, init).replace("def forward(self, x):", "def forward(self, x, y):")


TWO_INPUTS = "[torch.rand(4, 8), torch.rand(4, 8)]"
XY = {"input": {"t": "node", "id": "x"}, "target": {"t": "node", "id": "y"}}


@pytest.mark.parametrize(
    "init, forward, op, fn",
    [
        ("pass", "return F.mse_loss(x, y)", "mse_loss", {"reduction": const("mean")}),
        ("pass", "return F.mse_loss(x, y, reduction='sum')", "mse_loss", {"reduction": const("sum")}),
        # the legacy keywords override reduction, as torch.nn._reduction.legacy_get_string folds them
        ("pass", "return F.mse_loss(x, y, size_average=False)", "mse_loss", {"reduction": const("sum")}),
        ("pass", "return F.mse_loss(x, y, False)", "mse_loss", {"reduction": const("sum")}),
        ("pass", "return F.mse_loss(x, y, reduction='sum', size_average=True)", "mse_loss", {"reduction": const("mean")}),
        ("pass", "return F.l1_loss(x, y, reduce=False)", "l1_loss", {"reduction": const("none")}),
        ("pass", "return F.l1_loss(x, y, size_average=True, reduce=False)", "l1_loss", {"reduction": const("none")}),
        ("pass", "return F.smooth_l1_loss(x, y, size_average=False, reduce=True, beta=0.5)", "smooth_l1_loss",
         {"reduction": const("sum"), "beta": const(0.5)}),
        ("pass", "return F.huber_loss(x, y, delta=2.0)", "huber_loss", {"reduction": const("mean"), "delta": const(2.0)}),
        ("pass", "return F.kl_div(x, y, reduce=False)", "kl_div", {"reduction": const("none"), "log_target": const(False)}),
        ("pass", "return F.kl_div(x, y, reduction='batchmean', log_target=True)", "kl_div",
         {"reduction": const("batchmean"), "log_target": const(True)}),
        ("pass", "return F.soft_margin_loss(x, y, size_average=False)", "soft_margin_loss", {"reduction": const("sum")}),
        ("pass", "return F.poisson_nll_loss(x, y, reduce=False)", "poisson_nll_loss",
         {"reduction": const("none"), "log_input": const(True), "full": const(False), "eps": const(1e-08)}),
        ("pass", "return F.multilabel_soft_margin_loss(x, y, size_average=False)", "multilabel_soft_margin_loss",
         {"reduction": const("sum"), "weight": const(None)}),
        # modules fold the legacy keywords in __init__ and keep only `reduction`
        ("self.loss = nn.MSELoss(reduce=False)", "return self.loss(x, y)", "mse_loss", {"reduction": const("none")}),
        ("self.loss = nn.L1Loss(size_average=False)", "return self.loss(x, y)", "l1_loss", {"reduction": const("sum")}),
        # forward(log_input, target): its first argument is named as poisson_nll_loss' bool, not its input
        ("self.loss = nn.PoissonNLLLoss(log_input=False, full=True)", "return self.loss(x, y)", "poisson_nll_loss",
         {"reduction": const("mean"), "log_input": const(False), "full": const(True), "eps": {**const(1e-08), "attr": "loss.eps"}}),
    ],
)
def test_losses_normalise_to_input_target_reduction(tmp_path: Path, init: str, forward: str, op: str, fn: dict) -> None:
    graph = capture_text(tmp_path, loss_model(forward, init), inputs=TWO_INPUTS)
    assert node(graph, op)["fn"] == {**XY, **fn}


def test_cross_entropy_folds_the_legacy_keywords(tmp_path: Path) -> None:
    graph = capture_text(
        tmp_path,
        loss_model("return F.cross_entropy(x, y, size_average=False) + F.nll_loss(x, y, reduce=False).sum()"),
        inputs="[torch.randn(4, 8), torch.randint(0, 8, (4,))]",
    )
    common = {**XY, "weight": const(None), "ignore_index": const(-100)}
    assert node(graph, "cross_entropy")["fn"] == {**common, "reduction": const("sum"), "label_smoothing": const(0.0)}
    assert node(graph, "nll_loss")["fn"] == {**common, "reduction": const("none")}


def test_legacy_reduction_follows_torch() -> None:
    from torch.nn._reduction import legacy_get_string

    from kforge_worker.capture.normalize import legacy_reduction

    for size_average in (None, True, False):
        for reduce in (None, True, False):
            assert legacy_reduction(size_average, reduce) == legacy_get_string(size_average, reduce, emit_warning=False)


def test_a_weighted_loss_is_left_unnormalised(tmp_path: Path) -> None:
    # Newer torch gives mse_loss a `weight`; the loss rules know unweighted losses only, so a weighted call must
    # not read as one.
    import inspect

    import torch.nn.functional as F

    if "weight" not in inspect.signature(F.mse_loss).parameters:
        pytest.skip("this torch's mse_loss takes no weight")
    graph = capture_text(tmp_path, loss_model("return F.mse_loss(x, y, weight=y)"), inputs=TWO_INPUTS)
    assert node(graph, "mse_loss")["fn"] is None


def test_exported_losses_read_their_reduction_enum_as_a_string(tmp_path: Path) -> None:
    body = loss_model(
        """
        assert x.shape[1] == 8, "bad width"
        for i in range(x.size(0)):
            x = x + 1
        return F.mse_loss(x, y, reduction='sum') + F.l1_loss(x, y, reduce=False).sum()
        """
    )
    graph = capture_text(tmp_path, body, inputs=TWO_INPUTS)
    if graph["captured"] != "export":
        pytest.skip(f"captured with {graph['captured']}")
    assert node(graph, "mse_loss")["fn"]["reduction"] == const("sum")
    assert node(graph, "l1_loss")["fn"]["reduction"] == const("none")
    assert all(n["op"] != "unknown" for n in graph["nodes"]), ops(graph)  # broadcast_tensors included


@pytest.mark.parametrize(
    "forward, op, fn",
    [
        ("return torch.fft.rfft(x).abs()", "rfft", {"n": const(None), "dim": const(-1), "norm": const(None)}),
        ("return torch.fft.ifft(x, n=16, dim=0, norm='ortho').real", "ifft",
         {"n": const(16), "dim": const(0), "norm": const("ortho")}),
        ("return torch.argsort(x, dim=1, descending=True)", "argsort",
         {"dim": const(1), "descending": const(True), "stable": const(False)}),
        ("return torch.repeat_interleave(x, 2, dim=0)", "repeat_interleave",
         {"repeats": const(2), "dim": const(0), "output_size": const(None)}),
        ("return torch.hypot(x, x)", "hypot", {"other": {"t": "node", "id": "x"}}),
        ("return x.copysign(-1.0)", "copysign", {"other": const(-1.0)}),
        ("return torch.floor_divide(x, 0.75)", "div", {"other": const(0.75), "rounding_mode": const("floor")}),
        ("return x.floor_divide(0.75)", "div", {"other": const(0.75), "rounding_mode": const("floor")}),
        ("return torch.special.xlogy(x, x)", "xlogy", {"other": {"t": "node", "id": "x"}}),
        ("return torch.special.xlog1py(x, x)", "xlog1py", {"other": {"t": "node", "id": "x"}}),
        ("return torch.heaviside(x, x)", "heaviside", {"values": {"t": "node", "id": "x"}}),
        ("return torch.logaddexp2(x, x)", "logaddexp2", {"other": {"t": "node", "id": "x"}}),
        ("return x.sgn()", "sgn", {}),
        ("return torch.sinc(x)", "sinc", {}),
        ("return torch.special.entr(x)", "entr", {}),
        ("return torch.special.ndtr(x)", "ndtr", {}),
        ("return torch.special.log_ndtr(x)", "log_ndtr", {}),
        ("return torch.round(x, decimals=2)", "round", {"decimals": const(2)}),
        ("return x.round()", "round", {"decimals": const(0)}),
        ("return torch.aminmax(x, dim=1).max", "aminmax", {"dim": const(1), "keepdim": const(False)}),
        ("return x.swapaxes(0, 1)", "transpose", {"dim0": const(0), "dim1": const(1)}),
        ("return torch.swapaxes(x, axis0=1, axis1=0)", "transpose", {"dim0": const(1), "dim1": const(0)}),
        # the Frobenius matrix norm is ATen's vector norm of order 2 over the matrix dims
        ("return torch.linalg.matrix_norm(x)", "vector_norm",
         {"ord": const(2), "dim": ints(-2, -1), "keepdim": const(False), "dtype": const(None)}),
        ("return torch.swapdims(x, 0, -1)", "transpose", {"dim0": const(0), "dim1": const(-1)}),
        ("return F.poisson_nll_loss(x, x)", "poisson_nll_loss",
         {"target": {"t": "node", "id": "x"}, "log_input": const(True), "full": const(False), "eps": const(1e-8),
          "reduction": const("mean")}),
    ],
)
def test_common_ops_beyond_the_kernels_are_named_and_bound(tmp_path: Path, forward: str, op: str, fn: dict) -> None:
    graph = capture_text(tmp_path, model(forward))
    assert node(graph, op)["fn"] == {"input": {"t": "node", "id": "x"}, **fn}


@pytest.mark.parametrize(
    "forward",
    ["return torch.where(x > 0.5, x, x * 2)", "return x.where(x > 0.5, x * 2)", "return torch.where(x > 0.5, x, other=x * 2)"],
)
def test_where_binds_its_condition_however_written(tmp_path: Path, forward: str) -> None:
    # Tensor.where(condition, other) is torch.where(condition, self, other): self is the value, not the condition.
    graph = capture_text(tmp_path, model(forward))
    fn = node(graph, "where")["fn"]
    assert fn["input"] == {"t": "node", "id": "x"}
    assert fn["condition"] == {"t": "node", "id": node(graph, "gt")["id"]}
    assert fn["other"] == {"t": "node", "id": node(graph, "mul")["id"]}


@pytest.mark.parametrize(
    "forward",
    ["return torch.rsub(x, x * 2, alpha=3)", "return torch.rsub(x, other=x * 2, alpha=3)",
     "return torch.rsub(input=x, other=x * 2, alpha=3)"],
)
def test_rsub_is_a_reflected_sub_however_its_operands_are_passed(tmp_path: Path, forward: str) -> None:
    # torch.rsub(x, y, alpha) is y - alpha * x: a keyword `other` must swap as a positional one does
    graph = capture_text(tmp_path, model(forward))
    fn = node(graph, "sub")["fn"]
    assert fn["input"] == {"t": "node", "id": node(graph, "mul")["id"]}
    assert fn["other"] == {"t": "node", "id": "x"} and fn["alpha"] == const(3)


def test_lp_pool_modules_are_named_and_bound_like_the_functional_form(tmp_path: Path) -> None:
    graph = capture_text(
        tmp_path, model("return self.pool(x) + F.lp_pool2d(x, 3, 2)", "self.pool = nn.LPPool2d(2, 3, stride=2)"),
        inputs="[torch.rand(2, 4, 9, 9)]",
    )
    module, functional = [n for n in graph["nodes"] if n["op"] == "lp_pool2d"]
    assert module["kind"] == "call_module" and module["fn"]["norm_type"] == {**const(2), "attr": "pool.norm_type"}
    assert module["fn"]["kernel_size"] == {**const(3), "attr": "pool.kernel_size"}
    assert module["fn"]["stride"] == {**const(2), "attr": "pool.stride"}
    assert functional["fn"]["norm_type"] == const(3) and functional["fn"]["stride"] == const(None)


def test_a_call_writing_an_out_tensor_is_in_place(tmp_path: Path) -> None:
    # torch.sigmoid(y, out=buf) writes buf: a fresh output instead would leave buf unwritten for its readers
    graph = capture_text(tmp_path, model("buf = torch.empty_like(x)\ntorch.sigmoid(x * 2, out=buf)\nreturn buf + 1"))
    assert node(graph, "sigmoid")["inplace"] is True
    assert node(graph, "sigmoid")["kwargs"]["out"] == {"t": "node", "id": node(graph, "empty_like")["id"]}
    assert node(graph, "mul")["inplace"] is False


def test_an_int_beyond_json_doubles_keeps_its_digits_and_an_unknown_aten_write_is_in_place() -> None:
    # export's `x[::7]` slices to sys.maxsize: as a JSON number it reached the emitter as 9223372036854776000
    from kforge_worker.capture.encode import const, const_value
    from kforge_worker.capture.ops import aten_spec

    big = const(2**63 - 1)
    assert big["value"] == "9223372036854775807" and const_value(big) == 2**63 - 1
    assert const(2**53 - 1)["value"] == 2**53 - 1
    assert aten_spec("copy_").inplace is True and aten_spec("copy_").op == "unknown"
    assert aten_spec("scalar_tensor").inplace is False


@pytest.mark.parametrize("factory", ["ones", "zeros", "empty", "rand", "randn"])
def test_a_factory_sized_by_several_read_sizes_traces_with_fx(tmp_path: Path, factory: str) -> None:
    # torch.ones(n, n) with n = x.size(-1): fx alone raises a TypeError (several Proxies for one `size`)
    graph = capture_text(tmp_path, model(f"n = x.size(-1)\nreturn x @ torch.{factory}(n, n, device=x.device).tril()"))
    assert graph["captured"] == "fx", graph.get("notes")
    made = node(graph, factory)
    assert made["args"][0]["t"] == "list" and made["out"]["meta"]["shape"] == [8, 8]
    assert type(getattr(torch, factory)).__name__ == "builtin_function_or_method"  # torch's own again after tracing


def test_a_keyword_only_forward_parameter_is_its_default_for_fx(tmp_path: Path) -> None:
    # get_inputs() passes positionally, so `scale` takes its default; fx alone left it an unfed placeholder
    graph = capture_source(tmp_path, """
        class Model(nn.Module):
            def forward(self, x, *, scale: float = 2.0):
                return torch.relu(x) * scale

        def get_inputs():
            return [torch.rand(4, 8)]

        def get_init_inputs():
            return []
        """)
    assert graph["captured"] == "fx", graph.get("failure")
    assert graph["inputs"][1] == {"name": "scale", "meta": None, "value": const(2.0)}
    assert node(graph, "mul")["fn"]["other"] == const(2.0)


def test_einsum_and_like_factories_bind(tmp_path: Path) -> None:
    graph = capture_text(tmp_path, model("return torch.einsum('ij,kj->ik', x, x), torch.ones_like(x, dtype=torch.float64)"))
    x = {"t": "node", "id": "x"}
    assert node(graph, "einsum")["fn"] == {"equation": const("ij,kj->ik"), "operands": {"t": "list", "kind": "list", "items": [x, x]}}
    like = node(graph, "ones_like")["fn"]
    assert like["input"] == x and like["dtype"] == {"t": "const", "pytype": "dtype", "value": "float64"}


def test_max_along_a_dim_is_a_tuple_then_getitem(tmp_path: Path) -> None:
    graph = capture_text(tmp_path, model("return x.max(dim=1, keepdim=True)[0]"))
    assert ops(graph) == ["max_dim", "getitem"]
    max_dim, item = graph["nodes"]
    assert max_dim["fn"] == {"input": {"t": "node", "id": "x"}, "dim": const(1), "keepdim": const(True)}
    assert max_dim["out"]["t"] == "tuple"
    assert [m["dtype"] for m in max_dim["out"]["items"]] == ["float32", "int64"]
    assert item["fn"]["index"] == const(0)


@pytest.mark.parametrize("forward", ["return x.to(torch.float16)", "return x.to(dtype=torch.float16)",
                                     "return x.half()"])
def test_a_cast_to_a_dtype_reads_its_dtype_however_written(tmp_path: Path, forward: str) -> None:
    fn = node(capture_text(tmp_path, model(forward)), "to")["fn"]
    assert fn["dtype"] == {"t": "const", "pytype": "dtype", "value": "float16"} and "args" not in fn


@pytest.mark.parametrize(
    "forward, depends",
    [
        ("return F.dropout(x, p=0.5, training=self.training)", True),
        ("if self.training:\n    return x * 2\nreturn x", True),
        ("return self.drop(x) + 1", False),  # a module call reads its own flag when it runs
        ("return torch.relu(x)", False),
    ],
)
def test_a_graph_that_read_self_training_records_its_mode(tmp_path: Path, forward: str, depends: bool) -> None:
    graph = capture_text(tmp_path, model(forward, "self.drop = nn.Dropout(0.5)"))
    assert graph["captured"] == "fx"
    assert graph["specialisedTraining"] is (True if depends else None)


def test_a_tensor_literal_is_rebuilt_in_forward_and_read_as_a_number_where_0_d(tmp_path: Path) -> None:
    # fx builds it while tracing and holds it as a constant; it is made of Python values alone, so the emitted
    # forward can make it again, and a 0-d one is a scalar operand to the op reading it
    graph = capture_text(tmp_path, model(
        "v = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).to(x.device)\n"
        "return torch.min(x * v, torch.tensor(0.5))"
    ))
    assert graph["captured"] == "fx"
    literals = [n for n in graph["nodes"] if n["op"] == "tensor"]
    assert [(n["kind"], n["target"], n["args"][0]["t"]) for n in literals] == [
        ("call_function", "torch.tensor", "list"), ("call_function", "torch.tensor", "const")]
    minimum = node(graph, "minimum")
    assert minimum["fn"]["other"] == const(0.5)
    assert minimum["args"][1] == {"t": "node", "id": literals[1]["id"]}  # the call as written keeps the tensor


def test_a_dict_output_encodes_its_values_as_graph_references(tmp_path: Path) -> None:
    graph = capture_text(tmp_path, model('return {"a": x.relu(), "b": (x * 2, 3)}'))
    relu, mul = graph["nodes"]
    assert graph["output"] == {"t": "dict", "keys": [const("a"), const("b")], "values": [
        {"t": "node", "id": relu["id"]},
        {"t": "list", "kind": "tuple", "items": [{"t": "node", "id": mul["id"]}, const(3)]},
    ]}


def test_a_forward_taking_varargs_is_not_captured(tmp_path: Path) -> None:
    body = "class Model(nn.Module):\n    def forward(self, *xs):\n        return xs[0] + xs[1]\n"
    graph = capture_text(tmp_path, body, inputs="[torch.rand(4), torch.rand(4)]")
    assert graph["captured"] == "none" and "*xs" in graph["failure"]


@pytest.mark.parametrize("forward, inputs", [
    ("return torch.relu(xs[0] * 2 + xs[1])", "[[torch.rand(4), torch.rand(4)]]"),  # fx traces it
    ("return sum(xs[i] for i in range(len(xs)))", "[(torch.rand(4), torch.rand(4), torch.rand(4))]"),  # export
])
def test_a_list_of_tensors_as_one_argument_is_not_captured(tmp_path: Path, forward: str, inputs: str) -> None:
    # fx's graph was guarded by the list's repr (`[tensor(..., device='meta', ...)]`: a NameError on every call)
    # and export flattens the list into inputs the emitted forward does not bind
    body = f"class Model(nn.Module):\n    def forward(self, xs):\n        {forward}\n"
    graph = capture_text(tmp_path, body, inputs=inputs)
    assert graph["captured"] == "none" and "xs" in graph["failure"]
    ok = capture_text(tmp_path, "class Model(nn.Module):\n    def forward(self, x, k):\n        return x[:, k[0]:k[1]]\n",
                      inputs="[torch.rand(4, 8), [1, 3]]")
    assert ok["captured"] == "fx"  # a list of ints is its literal


def test_the_source_keeps_models_base_classes_as_written(tmp_path: Path) -> None:
    source = """
        class Base(nn.Module):
            def helper(self, x):
                return x * 2


        class Model(Base, metaclass=type(nn.Module)):
            def forward(self, x):
                return self.helper(x)
        """
    graph = capture_text(tmp_path, source)
    assert graph["source"]["bases"] == "Base, metaclass=type(nn.Module)"
    assert graph["captured"] == "fx"


def test_a_forward_model_inherits_is_written_as_a_call_of_its_bases(tmp_path: Path) -> None:
    graph = capture_text(tmp_path, """
        class Model(nn.Linear):
            def __init__(self):
                super().__init__(8, 4)
        """, inputs="[torch.rand(2, 8)]")
    assert graph["source"]["bases"] == "nn.Linear" and graph["captured"] == "fx"
    assert graph["source"]["signature"] == "self, input: torch.Tensor"
    assert graph["source"]["forward"].endswith("return super().forward(input)")


def test_batch_norm_with_momentum_none_and_instance_norm_with_running_stats_capture_with_fx(tmp_path: Path) -> None:
    # momentum=None reads num_batches_tracked as a Python number (a counter kept off meta); InstanceNorm updates
    # its running statistics when shape propagation runs it (the module call's own update, not the trace's)
    graph = capture_text(tmp_path, model(
        "return self.bn(x) + self.inorm(x)",
        "self.bn = nn.BatchNorm1d(3, momentum=None)\nself.inorm = nn.InstanceNorm1d(3, track_running_stats=True)",
    ), inputs="[torch.rand(2, 3, 5)]")
    assert graph["captured"] == "fx" and ops(graph) == ["batch_norm", "instance_norm", "add"]


@pytest.mark.parametrize("shape", ["x.shape[-1:]", "(x.size(-1),)", "x.shape[1:]"])
def test_a_normalized_shape_read_from_the_input_reads_as_its_sizes(tmp_path: Path, shape: str) -> None:
    graph = capture_text(tmp_path, model(f"return F.layer_norm(x, {shape})"))  # x: [4, 8]
    assert node(graph, "layer_norm")["fn"]["normalized_shape"] == ints(8)


def test_rms_norm_without_eps_takes_the_dtypes_epsilon(tmp_path: Path) -> None:
    graph = capture_text(tmp_path, model("return self.norm(x)", "self.norm = nn.RMSNorm(8)"))
    assert node(graph, "rms_norm")["fn"]["eps"] == const(float(torch.finfo(torch.float32).eps))


def test_batch_norm_in_training_reads_buffers_and_num_batches_tracked(tmp_path: Path) -> None:
    graph = capture_text(
        tmp_path,
        model("return self.bn(x)", "self.bn = nn.BatchNorm2d(3, eps=1e-3, momentum=0.2)"),
        inputs="[torch.rand(2, 3, 5, 5)]",
    )
    bn = node(graph, "batch_norm")
    assert bn["modeDependent"] and not bn["rng"]
    ref = lambda p: {"t": "param", "path": p}  # noqa: E731
    assert bn["fn"] == {
        "input": {"t": "node", "id": "x"},
        "running_mean": ref("bn.running_mean"),
        "running_var": ref("bn.running_var"),
        "weight": ref("bn.weight"),
        "bias": ref("bn.bias"),
        "training": const(True),
        "momentum": {**const(0.2), "attr": "bn.momentum"},
        "eps": {**const(0.001), "attr": "bn.eps"},
        "num_batches_tracked": ref("bn.num_batches_tracked"),
    }
    assert graph["params"]["bn.running_mean"] == {
        "kind": "buffer", "meta": {"shape": [3], "dtype": "float32", "stride": [1]}, "requiresGrad": False,
    }
    assert graph["params"]["bn.num_batches_tracked"]["meta"]["dtype"] == "int64"
    assert graph["params"]["bn.weight"]["kind"] == "parameter"
    assert graph["modules"]["bn"]["hyper"]["eps"] == const(0.001)
    assert graph["modules"]["bn"]["type"] == "torch.nn.modules.batchnorm.BatchNorm2d"


def test_conv_chain_with_pool_and_norms(tmp_path: Path) -> None:
    body = model(
        """
        x = self.conv(x)
        x = self.pool(x)
        x = self.gn(x)
        x = F.instance_norm(x)
        x = self.convt(x)
        return F.layer_norm(x, x.shape[-1:])
        """,
        """
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.pool = nn.MaxPool2d(2)
        self.gn = nn.GroupNorm(2, 8)
        self.convt = nn.ConvTranspose2d(8, 4, 3, stride=2, output_padding=1)
        """,
    )
    graph = capture_text(tmp_path, body, inputs="[torch.rand(2, 3, 32, 32)]")
    assert graph["captured"] == "fx"
    conv = node(graph, "conv2d")
    assert conv["fn"]["stride"] == ints(2, 2) and conv["fn"]["padding"] == ints(1, 1)
    assert conv["fn"]["bias"] == const(None) and conv["fn"]["groups"] == {**const(1), "attr": "conv.groups"}
    assert conv["out"]["meta"] == {"shape": [2, 8, 16, 16], "dtype": "float32", "stride": [2048, 256, 16, 1]}
    pool = node(graph, "max_pool2d")
    assert pool["fn"]["kernel_size"] == ints(2, 2) and pool["fn"]["stride"] == ints(2, 2)
    assert pool["fn"]["ceil_mode"] == const(False) and pool["fn"]["return_indices"] == const(False)
    assert node(graph, "group_norm")["fn"]["num_groups"] == {**const(2), "attr": "gn.num_groups"}
    assert node(graph, "instance_norm")["fn"]["use_input_stats"] == const(True)
    assert not node(graph, "instance_norm")["modeDependent"]
    convt = node(graph, "conv_transpose2d")
    assert convt["fn"]["output_padding"] == ints(1, 1) and convt["out"]["meta"]["shape"] == [2, 4, 18, 18]  # (8-1)*2 + 3 + 1
    assert node(graph, "layer_norm")["fn"]["eps"] == const(1e-05)
    assert "conv.bias" not in graph["params"] and graph["params"]["conv.weight"]["meta"]["shape"] == [8, 3, 3, 3]


def test_scalar_attribute_constants_carry_their_attribute(tmp_path: Path) -> None:
    body = model(
        "return (x * self.scaling_factor + self.bias_value) * 2.0",
        "self.scaling_factor = scaling_factor\nself.bias_value = 3\nself.other = 2.0\nself.unused = 0.5",
        init_args=", scaling_factor",
    )
    graph = capture_text(tmp_path, body, init="[0.5]")
    mul, add, mul2 = graph["nodes"]
    assert mul["fn"]["other"] == {**const(0.5), "attr": "scaling_factor"}
    assert add["fn"]["other"] == {**const(3), "attr": "bias_value"}
    assert "attr" not in mul2["fn"]["other"]  # 2.0 is self.other's value but the forward never reads it
    assert graph["scalarAttrs"] == {"scaling_factor": 0.5, "bias_value": 3, "other": 2.0, "unused": 0.5}


def test_a_constant_is_matched_only_to_attributes_of_the_modules_that_made_the_call(tmp_path: Path) -> None:
    body = """
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.stride = 1
            self.scale = 0.5

        def forward(self, x):
            return x * self.scale


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()

        def forward(self, x):
            return torch.flatten(self.block(x), 1) * 0.5
    """
    graph = capture_text(tmp_path, body)
    block_mul, flatten, root_mul = graph["nodes"]
    assert block_mul["fn"]["other"] == {**const(0.5), "attr": "block.scale"}
    assert flatten["fn"]["start_dim"] == const(1)  # the root's literal 1, not block.stride
    assert root_mul["fn"]["other"] == const(0.5)


def test_optional_none_argument_is_concrete_and_reported(tmp_path: Path) -> None:
    graph = capture_source(
        tmp_path,
        """
        class Model(nn.Module):
            def forward(self, x, mask=None, scale: float = 1.0):
                if mask is not None:
                    x = x + mask
                return x * scale

        def get_inputs():
            return [torch.rand(2, 3)]

        def get_init_inputs():
            return []
        """,
    )
    assert graph["captured"] == "fx" and ops(graph) == ["mul"]
    assert [i["name"] for i in graph["inputs"]] == ["x", "mask", "scale"]
    assert graph["inputs"][1] == {"name": "mask", "meta": None, "value": const(None)}
    assert graph["inputs"][2]["value"] == const(1.0)
    assert graph["source"]["signature"] == "self, x, mask=None, scale: float = 1.0"


def test_rng_inplace_and_dropout_flags(tmp_path: Path) -> None:
    body = model(
        "x = self.drop(x)\nx = x + torch.randn_like(x)\nx.relu_()\nreturn self.act(x)",
        "self.drop = nn.Dropout(0.2)\nself.act = nn.ReLU(inplace=True)",
    )
    graph = capture_text(tmp_path, body)
    drop, rand, _add, relu_, act = graph["nodes"]
    assert drop["op"] == "dropout" and drop["modeDependent"] and drop["rng"]
    assert drop["fn"]["p"] == const(0.2) and drop["fn"]["training"] == const(True)
    assert rand["rng"] and not rand["inplace"]
    assert relu_["op"] == "relu" and relu_["inplace"]
    assert act["op"] == "relu" and act["inplace"] and not act["rng"]


def test_in_place_functional_forms_are_their_ops_in_place(tmp_path: Path) -> None:
    # torch.relu_(x), F.leaky_relu_(x, 0.2), torch.clamp_min_(x, 0) write x as x.relu_() does (round 13: they were
    # unknown calls, so the chains around them were cut). Dropout's underscore callables bind other signatures.
    body = model(
        "y = x * 1.5\ntorch.relu_(y)\nF.leaky_relu_(y, 0.2)\ntorch.clamp_min_(y, -0.1)\nF.hardtanh_(y, -1.0, 1.0)\n"
        "torch.sigmoid_(y)\nreturn torch.dropout_(y, 0.0, False)",
    )
    graph = capture_text(tmp_path, body)
    _mul, relu_, leaky_, clamp_, hardtanh_, sigmoid_, drop_ = graph["nodes"]
    assert relu_["op"] == "relu" and relu_["inplace"]
    assert leaky_["op"] == "leaky_relu" and leaky_["inplace"] and leaky_["fn"]["negative_slope"] == const(0.2)
    assert clamp_["op"] == "clamp" and clamp_["inplace"] and clamp_["fn"]["max"] == const(None)
    assert clamp_["fn"]["min"] == const(-0.1)
    assert hardtanh_["op"] == "hardtanh" and hardtanh_["fn"]["max_val"] == const(1.0) and hardtanh_["inplace"]
    assert sigmoid_["op"] == "sigmoid" and sigmoid_["inplace"]
    assert drop_["op"] == "unknown"


def test_numpy_style_aliases_and_type_casts_are_their_ops(tmp_path: Path) -> None:
    # torch.arctan / x.arcsinh() / torch.greater / x.less_equal(0) / torch.fix, and x.type(torch.float16): the
    # same ops under other names, which were unknown calls cutting the chains around them.
    body = model(
        "a = torch.arctan(x) + x.arcsinh()\nb = torch.greater(x, 0.1) * x.less_equal(0.5)\n"
        "c = torch.fix(x).type(torch.float16)\nreturn a * b, c, x.type()"
    )
    graph = capture_text(tmp_path, body)
    assert ops(graph)[:8] == ["atan", "asinh", "add", "gt", "le", "mul", "trunc", "to"], ops(graph)
    casts = [n for n in graph["nodes"] if n["op"] == "to"]
    assert casts[0]["fn"]["dtype"] == {"t": "const", "pytype": "dtype", "value": "float16"}, casts[0]["fn"]
    # x.type() names the type (a str): no dtype for the cast rule to read
    assert all(n["fn"].get("dtype", const(None)) == const(None) for n in casts[1:]), casts[1:]


def test_huge_inputs_cost_nothing_and_cuda_inputs_are_fine(tmp_path: Path) -> None:
    graph = capture_text(
        tmp_path, model("return torch.sigmoid(x)"), inputs="[torch.randn(64, 1024, 1024, 32, device='cuda').half()]"
    )
    assert graph["inputs"][0]["meta"] == {"shape": [64, 1024, 1024, 32], "dtype": "float16", "stride": [33554432, 32768, 32, 1]}
    assert node(graph, "sigmoid")["out"]["meta"]["dtype"] == "float16"


def test_init_calling_item_builds_on_cpu_then_meta(tmp_path: Path) -> None:
    body = model("return x * self.scale + self.w", "self.scale = torch.rand(1).item() + 1.0\nself.w = nn.Parameter(torch.zeros(8))")
    graph = capture_text(tmp_path, body)
    assert graph["captured"] == "fx" and ops(graph) == ["mul", "add"]
    assert graph["nodes"][1]["fn"]["other"] == {"t": "param", "path": "w"}
    assert "scale" in graph["scalarAttrs"]


def test_untraceable_forward_falls_back_with_source_filled(tmp_path: Path) -> None:
    body = model(
        """
        assert x.shape[1] == 8, "bad width"
        out = x
        for i in range(x.size(0)):
            out = out + 1
        return torch.tanh(out)
        """
    )
    graph = capture_text(tmp_path, body)
    assert graph["captured"] in ("export", "none")
    if graph["captured"] == "export":
        assert "tanh" in ops(graph)
        assert node(graph, "tanh")["target"] == "torch.ops.aten.tanh.default"
    else:
        assert "torch.fx" in graph["failure"]
    assert "for i in range(x.size(0))" in graph["source"]["forward"]
    assert graph["inputs"][0]["meta"]["shape"] == [4, 8]


def test_untraceable_submodule_becomes_a_leaf(tmp_path: Path) -> None:
    graph = capture_source(
        tmp_path,
        """
        class Picky(nn.Module):
            def forward(self, x):
                for t in range(x.size(1)):  # a traced size used as an int: fx cannot
                    x = x * 2
                return x

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.picky = Picky()
                self.lstm = nn.LSTM(8, 16, batch_first=True)

            def forward(self, x):
                y, _ = self.lstm(x)
                return torch.relu(self.picky(y))

        def get_inputs():
            return [torch.rand(2, 5, 8)]

        def get_init_inputs():
            return []
        """,
    )
    assert graph["captured"] == "fx"
    assert ops(graph) == ["lstm", "getitem", "getitem", "unknown", "relu"]  # `y, _ = ...` unpacks both
    picky = node(graph, "unknown")
    assert picky["target"] == "picky" and picky["kind"] == "call_module"
    assert node(graph, "lstm")["out"]["t"] == "tuple" and node(graph, "lstm")["kind"] == "call_module"
    assert node(graph, "relu")["out"]["meta"]["shape"] == [2, 5, 16]


def test_source_split(tmp_path: Path) -> None:
    graph = capture_source(
        tmp_path,
        "SIZE = 8  # a constant\n\n\ndef helper(t):\n    return t * 2\n\n\n"
        + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
        + "    def forward(self, x):\n        return helper(self._twice(x))\n\n"
        + "    def _twice(self, x):\n        return x + x\n\n\n"
        + "def get_inputs():\n    return [torch.rand(SIZE)]\n\n\ndef get_init_inputs():\n    return []\n",
    )
    source = graph["source"]
    assert "SIZE = 8  # a constant" in source["prelude"] and "def helper(t):" in source["prelude"]
    assert "class Model" not in source["prelude"] and "get_inputs" not in source["prelude"]
    assert source["init"].startswith("    def __init__(self):")
    assert source["forward"] == "    def forward(self, x):\n        return helper(self._twice(x))"
    assert source["methods"] == ["    def _twice(self, x):\n        return x + x"]
    assert ops(graph) == ["add", "mul"]


def test_unknown_ops_never_crash(tmp_path: Path) -> None:
    graph = capture_text(tmp_path, model("return torch.special.bessel_j0(x) + torch.fft.fft2(x).real"))
    assert graph["captured"] == "fx"
    assert "unknown" in ops(graph)


def test_cli_writes_json_and_exits_2_on_a_bad_problem(tmp_path: Path) -> None:
    out = tmp_path / "graph.json"
    ok = run_worker(None, ("--capture", str(REPO / "test/fixtures/capture/conv_relu_scale.py"), "--out", str(out)))
    assert ok.returncode == 0, ok.stderr
    graph = json.loads(out.read_text())
    assert_valid(graph, "Graph")
    assert [n["op"] for n in graph["nodes"]] == ["conv2d", "relu", "mul"]
    bad = run_worker(None, ("--capture", str(REPO / "test/fixtures/capture/broken_init.py")))
    assert bad.returncode == 2 and bad.stdout == ""
    errors = [line for line in bad.stderr.splitlines() if line.startswith("kforge_worker: ")]
    assert errors == [bad.stderr.strip().splitlines()[-1]]
    assert "broken_init.py" in errors[0] and "refuses to be built" in errors[0]


def test_a_file_that_is_not_a_problem_raises(tmp_path: Path) -> None:
    path = tmp_path / "nothing.py"
    path.write_text("x = 1\n")
    with pytest.raises(ProblemError, match="nothing.py defines no Model"):
        capture_problem(str(path), log=lambda _m: None)


BUILT_IN = sorted(p for p in (REPO / "problems").glob("*.py"))


@pytest.mark.parametrize("path", BUILT_IN, ids=[p.stem for p in BUILT_IN])
def test_every_built_in_problem_captures(path: Path) -> None:
    graph = capture_problem(str(path), log=lambda _m: None)
    assert_valid(json.loads(json.dumps(graph, allow_nan=False)), "Graph")
    doc = (path.read_text().split('"""')[1] if path.read_text().lstrip().startswith('"""') else "").lower()
    if "cannot be traced" not in doc and "not traceable" not in doc and "untraceable" not in doc:
        assert graph["captured"] != "none", graph["failure"]
    assert graph["source"]["forward"] and graph["inputs"]


@pytest.mark.parametrize("path", BUILT_IN, ids=[p.stem for p in BUILT_IN])
def test_every_built_in_problem_names_and_binds_every_call(path: Path) -> None:
    # A gap here (an unknown op, or a known one whose call did not bind: fn null) leaves the op to PyTorch
    # without saying why; the built-in problems use common ops only, so none may have one.
    graph = capture_problem(str(path), log=lambda _m: None)
    gaps = [f"{n['target']} ({n['op']})" for n in graph["nodes"] if n["kind"] != "get_attr" and (n["op"] == "unknown" or n["fn"] is None)]
    assert gaps == []


@pytest.mark.parametrize(
    "init, forward",
    [
        # a tensor literal in forward: fx's `_tensor_constant`, export's lifted constant
        ("pass", "return x * torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])"),
        # an in-place change of a buffer: fx's graph would hold it outside the grad-mode block it was written in
        ('self.register_buffer("v", torch.rand(8) + 0.5)', "self.v.mul_(0.9)\nreturn x + self.v"),
        ('self.register_buffer("v", torch.rand(8) + 0.5)', "self.v.view(2, 4)[0] += 1.0\nreturn x + self.v"),
        # a reassigned buffer: fx would store its Proxy in the model and record no write
        ('self.register_buffer("v", torch.rand(8) + 0.5)', "self.v = self.v * 0.9\nreturn x + self.v"),
    ],
)
def test_a_graph_that_would_freeze_or_drop_model_state_is_not_captured_so(tmp_path: Path, init: str,
                                                                         forward: str) -> None:
    graph = capture_text(tmp_path, model(forward, init))
    names = {n["target"] for n in graph["nodes"] if n["kind"] == "get_attr"}
    assert not any(str(t).startswith(("_tensor_constant", "lifted_tensor", "c_lifted")) for t in names), graph["nodes"]
    if graph["captured"] == "fx":
        pytest.fail(f"fx's graph was kept: {ops(graph)}")
    # export keeps the buffer arithmetic (or the in-place op) as graph ops, or nothing is captured
    assert graph["captured"] in ("export", "none")
    if "mul_" in forward and graph["captured"] == "export":
        assert "mul_" in ops(graph) or "mul" in ops(graph), ops(graph)


@pytest.mark.parametrize(
    "init, forward",
    [
        ('self.register_buffer("s", torch.tensor(0.75))', "return x + self.s * 3.0"),
        ('self.register_buffer("v", torch.rand(8) + 0.5)', "return x / self.v.sqrt().view(1, 8)"),
        # a causal mask sliced by a size read from the input: fx failed on the real buffer's slice
        ('self.register_buffer("bias", torch.tril(torch.ones(16, 16)).view(1, 16, 16))',
         "t = x.size(1)\nreturn x.masked_fill(self.bias[:, :t, :t] == 0, float('-inf')).softmax(-1)"),
    ],
)
def test_fx_reads_buffers_in_its_graph(tmp_path: Path, init: str, forward: str) -> None:
    # Buffer arithmetic is a graph op on the buffer, read at every call (never a constant frozen at trace time).
    inputs = "[torch.rand(4, 16, 16)]" if "bias" in init else "[torch.rand(4, 8)]"
    graph = capture_text(tmp_path, model(forward, init), inputs=inputs)
    assert graph["captured"] == "fx", graph["failure"]
    names = {n["target"] for n in graph["nodes"] if n["kind"] == "get_attr"}
    assert not any(str(t).startswith("_tensor_constant") for t in names), graph["nodes"]
    assert any(a.get("t") == "param" for n in graph["nodes"] for a in n["args"] if isinstance(a, dict)), graph["nodes"]


def test_a_0d_tensor_made_in_forward_is_a_value_beside_meta_tensors(tmp_path: Path) -> None:
    # masked_fill's meta kernel refuses a value on another device, which a GPU accepts from a 0-d CPU tensor:
    # fx's shapes propagate with the constant on meta instead of failing the capture.
    forward = "return torch.softmax(x.masked_fill(x < 0.5, torch.tensor(-1e4)), dim=-1)"
    graph = capture_text(tmp_path, model(forward))
    assert graph["captured"] == "fx", graph["failure"]
    fill = next(n for n in graph["nodes"] if n["op"] == "masked_fill")
    assert fill["out"]["meta"]["shape"] == [4, 8] and fill["out"]["meta"]["dtype"] == "float32"


def test_a_submodule_slicing_a_buffer_by_a_traced_size_is_traced_through(tmp_path: Path) -> None:
    # minGPT's attention: `self.bias[:, :, :T, :T]` with T from `x.size()` failed on the real buffer, so fx called
    # the whole attention submodule as one node and its masked softmax stayed out of every region.
    source = """
import torch
import torch.nn as nn

class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(16, 16)).view(1, 1, 16, 16))

    def forward(self, x):
        B, H, T, _ = x.size()
        return x.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf')).softmax(-1)

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()

    def forward(self, x):
        return self.attn(x) * 2
"""
    graph = capture_text(tmp_path, source, inputs="[torch.randn(2, 4, 8, 8)]")
    assert graph["captured"] == "fx", graph["failure"]
    assert "softmax" in ops(graph) and "attn" not in {str(n["target"]) for n in graph["nodes"]}, ops(graph)


def test_a_no_grad_block_that_export_captures_is_inlined(tmp_path: Path) -> None:
    # export writes `with torch.no_grad():` as a higher-order op calling a submodule graph: neither exists in
    # the emitted file, whose forward then failed on its first line (`self.submod_1`).
    init = 'self.register_buffer("ema", torch.zeros(8))\nself.register_buffer("steps", torch.zeros((), dtype=torch.long))'
    forward = """
        with torch.no_grad():
            self.ema.mul_(0.9).add_(x.mean(0), alpha=0.1)
            self.steps += 1
        return x - self.ema
        """
    graph = capture_text(tmp_path, model(forward, init))
    assert graph["captured"] == "export", graph["failure"]
    targets = [str(n["target"]) for n in graph["nodes"]]
    assert not any("wrap_with" in t or t.startswith("submod") for t in targets), targets
    assert [t.split(".")[-2] for t in targets[:4]] == ["mul_", "mean", "add_", "add_"], targets


def test_an_autocast_block_is_not_captured_without_its_dtypes(tmp_path: Path) -> None:
    # fx runs `with torch.autocast(...)` at trace time and records none of it: its graph ran the Linear in
    # fp32 where the reference's runs in bf16 on the GPU. export writes it as a higher-order op: refused too.
    forward = """
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            y = self.fc(x) * 2
        return torch.relu(y.float())
        """
    graph = capture_text(tmp_path, model(forward, "self.fc = nn.Linear(8, 8)"))
    assert graph["captured"] == "none", ops(graph)
    assert "autocast" in graph["failure"]


@pytest.mark.parametrize(
    "init, forward",
    [
        ("self.scale = 1.0", "self.scale = self.scale * 0.5\nreturn x * self.scale"),
        ("self.calls = 0", "self.calls += 1\nreturn x + self.calls"),
        ("self.h = None", "self.h = x.mean()\nreturn x - self.h"),
    ],
)
def test_a_forward_assigning_module_attributes_is_not_captured(tmp_path: Path, init: str, forward: str) -> None:
    # traced once, the assignment is gone from the graph, which holds the value of the first call: the second call
    # of the emitted file scaled by 0.5 where the reference scaled by 0.25
    graph = capture_text(tmp_path, model(forward, init))
    assert graph["captured"] == "none"
    assert "assigns module attributes" in graph["failure"]
    kept = capture_text(tmp_path, model("return x * self.scale", "self.scale = 0.5"))
    assert kept["captured"] == "fx"  # read, never written: a constant of the graph


def test_lazy_modules_are_captured_with_the_shapes_their_first_call_gives(tmp_path: Path) -> None:
    # nn.LazyLinear has no weight shape until it runs; capture used to fail reading the uninitialised parameter
    graph = capture_text(tmp_path, model(
        "return F.gelu(self.bn(self.fc(x)))",
        "self.fc = nn.LazyLinear(6)\nself.bn = nn.BatchNorm1d(6)",
    ))
    assert graph["captured"] == "fx" and ops(graph) == ["linear", "batch_norm", "gelu"]
    assert graph["params"]["fc.weight"]["meta"]["shape"] == [6, 8]


@pytest.mark.parametrize("factory", ["torch.tensor(x.size(-1), dtype=torch.float32)", "torch.as_tensor(x.shape[-1])",
                                     "torch.scalar_tensor(x.size(1))"])
def test_a_tensor_made_from_a_traced_size_is_captured_by_fx(tmp_path: Path, factory: str) -> None:
    # the argument parser read the Proxy as array data (`__cuda_array_interface__` must be a dict): fx failed
    graph = capture_text(tmp_path, model(f"return torch.softmax(x / torch.sqrt({factory}), dim=-1)"))
    assert graph["captured"] == "fx", graph["failure"]
    assert ops(graph)[-3:] == ["sqrt", "div", "softmax"]


def test_interpolate_binds_in_both_forms_with_its_newer_arguments(tmp_path: Path) -> None:
    # F.interpolate's recompute_scale_factor / antialias (and nn.Upsample, which passes them) made the call
    # unbindable: an op without arguments no rule can read (its mode, its scale).
    body = model(
        "a = F.interpolate(x, scale_factor=2, mode='nearest', recompute_scale_factor=None)\n"
        "b = F.interpolate(x, size=(8, 8), mode='bilinear', align_corners=False, antialias=False)\n"
        "return self.up(a) + self.up(b)",
        init="self.up = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)",
    )
    graph = capture_text(tmp_path, body, inputs="[torch.rand(2, 3, 4, 4)]")
    nodes = [n for n in graph["nodes"] if n["op"] == "interpolate"]
    assert len(nodes) == 4 and all(n["fn"] is not None for n in nodes), nodes
    assert [n["fn"]["mode"]["value"] for n in nodes] == ["nearest", "bilinear", "bilinear", "bilinear"]
    assert nodes[2]["fn"]["align_corners"] == const(True), nodes[2]["fn"]


def test_a_module_with_hooks_keeps_its_own_call(tmp_path: Path) -> None:
    # The legacy weight_norm recomputes `weight` from weight_g / weight_v in a forward pre-hook: a region that
    # ran the conv from `self.conv.weight` would use the weight of the last call, stale after load_state_dict.
    # The parametrisation form has no hook (`weight` is computed on each read) and stays a conv.
    body = model(
        "return torch.relu(self.a(x)) + torch.relu(self.b(x)) + self.c(x)",
        init=(
            "import warnings\nwarnings.filterwarnings('ignore')\n"
            "self.a = nn.utils.weight_norm(nn.Conv2d(3, 4, 1))\n"
            "self.b = nn.utils.parametrizations.weight_norm(nn.Conv2d(3, 4, 1))\n"
            "self.c = nn.Conv2d(3, 4, 1)\nself.c.register_forward_hook(lambda m, i, o: o * 2)"
        ),
    )
    graph = capture_text(tmp_path, body, inputs="[torch.rand(2, 3, 4, 4)]")
    by_target = {n["target"]: n["op"] for n in graph["nodes"] if n["kind"] == "call_module"}
    assert by_target == {"a": "hooked_module", "b": "conv2d", "c": "hooked_module"}, by_target


def test_an_untraced_block_holding_a_dropout_child_is_an_fx_leaf_and_transformer_layers_split_by_mode(
    tmp_path: Path,
) -> None:
    # A block fx cannot trace, with a child named `dropout` (an nn.Dropout, not MultiheadAttention's float),
    # crashed the mode flags (float() of a module) and sent the whole model to export. nn.TransformerEncoderLayer
    # in eval mode stays one call: without autograd its forward takes a fused fast path (zeros at padded positions
    # with a padding mask) that no trace of its Python ops reproduces; in training mode export traces it through.
    source = """
        class Picky(nn.Module):
            def __init__(self):
                super().__init__()
                self.dropout = nn.Dropout(0.1)

            def forward(self, x):
                for t in range(x.size(1)):  # a traced size used as an int: fx cannot
                    x = x * 2
                return self.dropout(x)

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.picky = Picky()
                self.layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
                MODE

            def forward(self, x):
                return torch.relu(self.layer(self.picky(x)))

        def get_inputs():
            return [torch.rand(2, 5, 8)]

        def get_init_inputs():
            return []
        """
    graph = capture_source(tmp_path, source.replace("MODE", "self.layer.eval()"))
    assert graph["captured"] == "fx", graph.get("failure")
    assert ops(graph) == ["unknown", "unknown", "relu"], ops(graph)
    picky, layer = graph["nodes"][0], graph["nodes"][1]
    assert (picky["target"], layer["target"]) == ("picky", "layer")
    assert picky["modeDependent"] and picky["rng"], "its dropout draws in training and is mode dependent"
    trained = capture_source(tmp_path, source.replace("MODE", "pass"))
    assert trained["captured"] == "export", trained.get("failure")
    assert "layer_norm" in ops(trained) and "gelu" not in ops(trained) and "relu" in ops(trained)


def test_a_function_checking_its_input_values_gets_its_shape_on_the_cpu(tmp_path: Path) -> None:
    # gaussian_nll_loss raises on a negative variance (`torch.any(var < 0)`), which meta tensors cannot answer: fx's
    # shape propagation failed, export too (a data-dependent guard), and the whole file ran the reference.
    forward = "return F.gaussian_nll_loss(x, x * 2, x.abs() + 0.1, full=True) + torch.sigmoid(x).sum()"
    graph = capture_text(tmp_path, model(forward))
    assert graph["captured"] == "fx", graph["failure"]
    loss = next(n for n in graph["nodes"] if n["op"] == "gaussian_nll_loss")
    assert loss["out"]["meta"]["shape"] == [] and loss["out"]["meta"]["dtype"] == "float32"
    # a shape read from the values (one_hot's class count) is not guessed: shape propagation still fails
    from kforge_worker.capture.fx_capture import propagate_shapes, trace

    class OneHot(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.one_hot((x > 0.5).long()).float() * 2

    gm, _ = trace(OneHot(), [torch.rand(4, 8)])
    with pytest.raises(RuntimeError):
        propagate_shapes(gm, [torch.rand(4, 8, device="meta")])


def test_a_parameter_an_op_is_not_differentiable_in_captures(tmp_path: Path) -> None:
    # binary_cross_entropy_with_logits refuses a pos_weight that requires grad; the harness calls the reference
    # under no_grad, where it runs. Shape propagation with grad on failed, export too: the file ran the reference.
    forward = "return F.binary_cross_entropy_with_logits(x, (x > 0.5).float(), pos_weight=self.pw, reduction='sum')"
    graph = capture_text(tmp_path, model(forward, init="self.pw = nn.Parameter(torch.rand(8))"))
    assert graph["captured"] == "fx", graph["failure"]
    assert node(graph, "binary_cross_entropy_with_logits")["out"]["meta"]["shape"] == []


def test_an_augmented_assignment_is_recorded_in_place(tmp_path: Path) -> None:
    # fx's Proxy has no __iadd__: `x += y` traced as `x = x + y`, and the emitted forward left the caller's x as it was.
    source = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, y):
        x += y
        x *= 2
        return torch.sigmoid(x)

def get_inputs():
    return [torch.rand(4, 8), torch.rand(4, 8)]

def get_init_inputs():
    return []
"""
    graph = capture_source(tmp_path, source)
    assert graph["captured"] == "fx", graph["failure"]
    writes = [(n["op"], n["inplace"]) for n in graph["nodes"] if n["op"] in ("add", "mul")]
    assert writes == [("add", True), ("mul", True)], graph["nodes"]


def test_random_initialisers_on_meta_leave_the_compiler_unimported() -> None:
    """An __init__'s random fills (nn.init.normal_, kaiming_normal_, Tensor.normal_) on the meta device write no
    values; their meta versions would import torch._dynamo (seconds of a capture), so capture answers them with
    the tensor itself, same shape and dtype."""
    import subprocess
    import sys

    script = textwrap.dedent("""
        import sys, torch, torch.nn as nn
        from kforge_worker.capture.build import meta_model

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(10, 6)
                self.conv = nn.Conv2d(3, 4, 3)
                nn.init.normal_(self.emb.weight, 0, 0.02)
                nn.init.kaiming_normal_(self.conv.weight, mode="fan_out")
                self.extra = nn.Parameter(torch.empty(5, 2).normal_().exponential_())

        model, how = meta_model(Model, [], print)
        shapes = {n: (tuple(p.shape), p.is_meta) for n, p in model.named_parameters()}
        print(how, shapes["emb.weight"], shapes["conv.weight"], shapes["extra"], "torch._dynamo" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=REPO / "python").stdout.strip().splitlines()[-1]
    assert out == "meta ((10, 6), True) ((4, 3, 3, 3), True) ((5, 2), True) False"
