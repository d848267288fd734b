"""Capture (python -m kforge_worker --capture): canonical ops, normalised calls, shapes on meta, params,
source split, the export / none fallbacks, and every built-in problem against the Graph JSON Schema."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, assert_valid, run_worker

from kforge_worker.capture import ProblemError, capture_problem

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def capture_text(tmp_path: Path, body: str, inputs: str = "[torch.rand(4, 8)]", init: str = "[]") -> dict[str, Any]:
    path = tmp_path / "problem.py"
    path.write_text(
        HEADER
        + textwrap.dedent(body)
        + f"\n\ndef get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return {init}\n"
    )
    graph = capture_problem(str(path), log=lambda _m: None)
    assert_valid(json.loads(json.dumps(graph, allow_nan=False)), "Graph")
    return graph


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
        ("self.a = nn.LeakyReLU(0.2)", "return self.a(x)", "leaky_relu", {"negative_slope": const(0.2)}),
        ("pass", "return F.leaky_relu(x)", "leaky_relu", {"negative_slope": const(0.01)}),
        ("self.a = nn.GELU(approximate='tanh')", "return self.a(x)", "gelu", {"approximate": const("tanh")}),
        ("pass", "return torch._C._nn.gelu(x)", "gelu", {"approximate": const("none")}),
        ("self.a = nn.ReLU6()", "return self.a(x)", "hardtanh", {"min_val": const(0.0), "max_val": const(6.0)}),
        ("pass", "return F.relu6(x)", "hardtanh", {"min_val": const(0.0), "max_val": const(6.0)}),
        ("pass", "return torch.clamp(x, min=0.5)", "clamp", {"min": const(0.5), "max": const(None)}),
        ("pass", "return x.clip(-1, 1)", "clamp", {"min": const(-1), "max": const(1)}),
        ("self.a = nn.Softplus(beta=2)", "return self.a(x)", "softplus", {"beta": const(2), "threshold": const(20.0)}),
        ("self.a = nn.ELU(alpha=0.5)", "return self.a(x)", "elu", {"alpha": const(0.5)}),
        ("self.a = nn.Softmax(dim=-1)", "return self.a(x)", "softmax", {"dim": const(-1), "dtype": const(None)}),
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


def test_max_along_a_dim_is_a_tuple_then_getitem(tmp_path: Path) -> None:
    graph = capture_text(tmp_path, model("return x.max(dim=1, keepdim=True)[0]"))
    assert ops(graph) == ["max_dim", "getitem"]
    max_dim, item = graph["nodes"]
    assert max_dim["fn"] == {"input": {"t": "node", "id": "x"}, "dim": const(1), "keepdim": const(True)}
    assert max_dim["out"]["t"] == "tuple"
    assert [m["dtype"] for m in max_dim["out"]["items"]] == ["float32", "int64"]
    assert item["fn"]["index"] == const(0)


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
        "momentum": const(0.2),
        "eps": const(0.001),
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
    assert conv["fn"]["bias"] == const(None) and conv["fn"]["groups"] == const(1)
    assert conv["out"]["meta"] == {"shape": [2, 8, 16, 16], "dtype": "float32", "stride": [2048, 256, 16, 1]}
    pool = node(graph, "max_pool2d")
    assert pool["fn"]["kernel_size"] == ints(2, 2) and pool["fn"]["stride"] == ints(2, 2)
    assert pool["fn"]["ceil_mode"] == const(False) and pool["fn"]["return_indices"] == const(False)
    assert node(graph, "group_norm")["fn"]["num_groups"] == const(2)
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


def test_optional_none_argument_is_concrete_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "problem.py"
    path.write_text(
        HEADER
        + textwrap.dedent(
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
            """
        )
    )
    graph = capture_problem(str(path), log=lambda _m: None)
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
    path = tmp_path / "problem.py"
    path.write_text(
        HEADER
        + textwrap.dedent(
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
            """
        )
    )
    graph = capture_problem(str(path), log=lambda _m: None)
    assert graph["captured"] == "fx"
    assert ops(graph) == ["lstm", "getitem", "getitem", "unknown", "relu"]  # `y, _ = ...` unpacks both
    picky = node(graph, "unknown")
    assert picky["target"] == "picky" and picky["kind"] == "call_module"
    assert node(graph, "lstm")["out"]["t"] == "tuple" and node(graph, "lstm")["kind"] == "call_module"
    assert node(graph, "relu")["out"]["meta"]["shape"] == [2, 5, 16]


def test_source_split(tmp_path: Path) -> None:
    path = tmp_path / "problem.py"
    path.write_text(
        HEADER
        + "SIZE = 8  # a constant\n\n\ndef helper(t):\n    return t * 2\n\n\n"
        + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
        + "    def forward(self, x):\n        return helper(self._twice(x))\n\n"
        + "    def _twice(self, x):\n        return x + x\n\n\n"
        + "def get_inputs():\n    return [torch.rand(SIZE)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    graph = capture_problem(str(path), log=lambda _m: None)
    source = graph["source"]
    assert "SIZE = 8  # a constant" in source["prelude"] and "def helper(t):" in source["prelude"]
    assert "class Model" not in source["prelude"] and "get_inputs" not in source["prelude"]
    assert source["init"].startswith("    def __init__(self):")
    assert source["forward"] == "    def forward(self, x):\n        return helper(self._twice(x))"
    assert source["methods"] == ["    def _twice(self, x):\n        return x + x"]
    assert ops(graph) == ["add", "mul"]


def test_unknown_ops_never_crash(tmp_path: Path) -> None:
    graph = capture_text(tmp_path, model("return torch.special.bessel_j0(x) + torch.fft.fft(x).real"))
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
