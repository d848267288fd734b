"""graph_replay.py.txt (the CUDA-graph replay an emitted forward may ship with) on the GPU: the replayed forward must
be the forward — fresh values each call, outputs nobody else holds, running statistics advanced once per call,
weights read as they are now (written in place or replaced) — and must step aside where a graph cannot stand for
the call (autograd, a CPU tensor, a signature past the limit). A forward that synchronises with the host is never
given a graph (model-file.ts graphReplayable): a capture failing part-way leaves torch's CUDA generator in capture
mode for the process."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

RUNTIME = Path(__file__).resolve().parents[2] / "src" / "optimize" / "codegen" / "graph_replay.py.txt"


@pytest.fixture()
def rt():
    namespace = {"torch": torch, "_KF_DISABLED": set()}
    exec(compile(RUNTIME.read_text(), str(RUNTIME), "exec"), namespace)  # noqa: S102 — the emitted file's own code
    return namespace


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.lin = nn.Linear(8, 5)

    def forward(self, x, scale):
        y = torch.relu(self.bn(self.conv(x))) * scale
        return self.lin(y.mean((2, 3))), y.sum()


def _pair(seed: int = 0):
    torch.manual_seed(seed)
    ref = _Block().cuda()
    graphed = _Block().cuda()
    graphed.load_state_dict(ref.state_dict())
    return ref, graphed


def _call(rt, model, *args):
    out = rt["_kf_graph_replay"](model, model.forward, args)
    assert out is not rt["_KF_NOT_GRAPHED"]
    return out


def _close(a, b):
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)


def test_fresh_inputs_running_statistics_and_outputs_held_across_calls(rt):
    ref, graphed = _pair()
    held = []
    with torch.no_grad():
        for i in range(4):
            x = torch.randn(2, 4, 6, 6, device="cuda") * (i + 1)
            expected = ref(x, 0.5)
            got = _call(rt, graphed, x, 0.5)
            _close(got, expected)
            held.append((got, expected))
    for got, expected in held:  # a later replay wrote the graph's outputs, never what it returned
        _close(got, expected)
    torch.testing.assert_close(graphed.bn.running_mean, ref.bn.running_mean)
    torch.testing.assert_close(graphed.bn.running_var, ref.bn.running_var)
    assert int(graphed.bn.num_batches_tracked) == int(ref.bn.num_batches_tracked) == 4
    assert len(rt["_kf_graph_state"](graphed)["graphs"]) == 1


def test_weights_written_in_place_or_replaced_are_read_as_they_are_now(rt):
    ref, graphed = _pair(1)
    ref.eval()
    graphed.eval()
    x = torch.randn(2, 4, 6, 6, device="cuda")
    with torch.no_grad():
        _call(rt, graphed, x, 1.0)
        w = torch.randn_like(ref.lin.weight)
        ref.lin.weight.copy_(w)
        graphed.lin.weight.data.copy_(w)
        _close(_call(rt, graphed, x, 1.0), ref(x, 1.0))
        b = torch.randn_like(ref.lin.bias)
        ref.lin.bias.data = b.clone()
        graphed.lin.bias.data = b.clone()  # another address: another signature
        _close(_call(rt, graphed, x, 1.0), ref(x, 1.0))
        # a scalar argument is baked into a graph: another value is another signature
        _close(_call(rt, graphed, x, 3.0), ref(x, 3.0))
        graphed.train()
        ref.train()
        _close(_call(rt, graphed, x, 1.0), ref(x, 1.0))


def test_where_a_graph_cannot_stand_for_the_call_the_forward_runs_itself(rt):
    _, graphed = _pair(2)
    x = torch.randn(2, 4, 6, 6, device="cuda")
    assert rt["_kf_graph_replay"](graphed, graphed.forward, (x, 1.0)) is rt["_KF_NOT_GRAPHED"]  # autograd
    with torch.no_grad():
        assert rt["_kf_graph_replay"](graphed, graphed.forward, (x.cpu(), 1.0)) is rt["_KF_NOT_GRAPHED"]

        for n in range(rt["_KF_GRAPH_LIMIT"]):
            _call(rt, graphed, torch.randn(2 + n, 4, 6, 6, device="cuda"), 1.0)
        past = torch.randn(9, 4, 6, 6, device="cuda")
        assert rt["_kf_graph_replay"](graphed, graphed.forward, (past, 1.0)) is rt["_KF_NOT_GRAPHED"]


def test_an_attribute_set_after_the_capture_gets_a_graph_of_its_own(rt):
    """The emitted forward passes the number-valued attributes it reads (model-file.ts replayedAttrs): a graph
    holds the value it was captured with."""
    ref, graphed = _pair(3)
    ref.eval()
    graphed.eval()
    graphed.gain = ref.gain = 2.0

    def planned(model):
        return lambda x: (model(x, model.gain)[0],)

    x = torch.randn(2, 4, 6, 6, device="cuda")
    with torch.no_grad():
        for gain in (2.0, 5.0, 2.0):
            graphed.gain = ref.gain = gain
            out = rt["_kf_graph_replay"](graphed, planned(graphed), (x,), (graphed.gain,))
            assert out is not rt["_KF_NOT_GRAPHED"]
            _close(out, planned(ref)(x))
    assert len(rt["_kf_graph_state"](graphed)["graphs"]) == 2


def test_inference_mode_and_no_grad_calls_each_get_their_graph(rt):
    ref, graphed = _pair(4)
    ref.eval()
    graphed.eval()
    x = torch.randn(2, 4, 6, 6, device="cuda")
    with torch.inference_mode():
        _close(_call(rt, graphed, x, 1.0), ref(x, 1.0))
    with torch.no_grad():  # the inference-mode graph's inputs could not be written here
        _close(_call(rt, graphed, x, 1.0), ref(x, 1.0))
    assert len(rt["_kf_graph_state"](graphed)["graphs"]) == 2
