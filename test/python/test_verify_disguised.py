"""disguised_run (checks/disguised.py): the candidate run once more as a plain script in a fresh process — what that
process shows of the evaluator, and that what it returns is the candidate's own answer there."""

from __future__ import annotations

import os

import torch

from conftest import problem
from kforge_worker.checks.disguised import Disguise, plain_environment, run_plain

# Answers with what it can see of an evaluator: modules and environment keys named like it, its own module's name.
_SPYING = """
import os, sys
import torch
from torch import nn

class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        modules = sum(1 for m in sys.modules if "kforge" in m.lower())
        keys = sum(1 for k in os.environ if "kforge" in k.lower())
        extensions = "kforge" in os.environ.get("TORCH_EXTENSIONS_DIR", "").lower()
        plain_name = __name__ == os.path.splitext(os.path.basename(__file__))[0]
        return [torch.relu(self.fc(x)), torch.tensor([modules, keys, int(extensions), int(plain_name)])]
"""


def _spec(tmp_path, source: str) -> Disguise:
    return Disguise(problem("tiny_linear"), str(tmp_path / "model_new.py"), source, 1234, [16, 8], None, False)


def test_the_plain_process_shows_no_evaluator_and_answers_with_the_references_weights(tmp_path, monkeypatch):
    ext = tmp_path / "kforge-cache" / "extensions"
    ext.mkdir(parents=True)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(ext))
    monkeypatch.setenv("KFORGE_SOMETHING", "1")
    monkeypatch.setenv("npm_package_bin_kforge", "bin/kforge.js")  # what `npm test` / `npx kforge` put there
    torch.manual_seed(1234)
    from torch import nn

    ref = nn.Linear(16, 8)
    with torch.no_grad():
        ref.weight.mul_(-1)  # not what the seed makes: the answer must come from the weights handed over
    state = {f"fc.{k}": v.clone() for k, v in ref.state_dict().items()}
    x = torch.rand(4, 16)
    outs, why = run_plain(_spec(tmp_path, _SPYING), state, [x], torch.device("cpu"))
    assert outs is not None, why
    answer, seen = outs
    assert torch.allclose(answer, torch.relu(ref(x)), atol=1e-6)
    modules, keys, extensions, plain_name = seen.tolist()
    assert (modules, keys, extensions, plain_name) == (0, 0, 0, 1)


def test_a_candidate_that_fails_there_is_said_with_its_last_words(tmp_path):
    outs, why = run_plain(_spec(tmp_path, "raise RuntimeError('no GPU here')\n"), {}, [torch.rand(4, 16)],
                          torch.device("cpu"))
    assert outs is None and "no GPU here" in why


def test_the_environment_loses_kforges_keys_and_package_path_and_keeps_the_rest(tmp_path, monkeypatch):
    kforge_python = os.path.dirname(os.path.dirname(os.path.abspath(__import__("kforge_worker").__file__)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([kforge_python, "/opt/user/lib"]))
    monkeypatch.setenv("KFORGE_CACHE_DIR", "/somewhere")
    monkeypatch.setenv("USER_SETTING", "kept")
    monkeypatch.setenv("npm_lifecycle_event", "test")
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    env = plain_environment(str(tmp_path))
    assert not [k for k in env if "kforge" in k.lower() or k.startswith("npm_")]
    assert env["PYTHONPATH"] == "/opt/user/lib" and env["USER_SETTING"] == "kept"
    assert env["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path))


# Echoes its inputs back as they arrived (values, dtypes, shapes, strides) beside a 0-d and an empty output.
_ECHO = """
import torch
from torch import nn

class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()

    def forward(self, a, b, c, d, scale):
        return [a, b, c, torch.tensor(d.stride(), dtype=torch.int64), d.contiguous() * scale, a.sum(), a[:0]]
"""


def test_inputs_and_outputs_cross_as_raw_bytes_whatever_their_dtype_and_layout(tmp_path):
    a = torch.randn(5, 3, dtype=torch.bfloat16)
    b = torch.rand(4, 2) > 0.5
    c = torch.randint(-(2**40), 2**40, (6,), dtype=torch.int64)
    d = torch.randn(3, 4).t()  # not contiguous: pickled with its strides
    outs, why = run_plain(_spec(tmp_path, _ECHO), {}, [a, b, c, d, 2.5], torch.device("cpu"))
    assert outs is not None, why
    assert torch.equal(outs[0], a) and outs[0].dtype == torch.bfloat16
    assert torch.equal(outs[1], b) and outs[1].dtype == torch.bool
    assert torch.equal(outs[2], c)
    assert outs[3].tolist() == list(d.stride())
    assert torch.equal(outs[4], d * 2.5)
    assert outs[5].shape == () and torch.equal(outs[5], a.sum())
    assert outs[6].shape == (0, 3)


def test_an_output_file_that_disagrees_with_its_description_is_refused(tmp_path):
    import json

    from kforge_worker.checks.disguised import _read_outputs

    (tmp_path / "out_0.bin").write_bytes(b"\0" * 12)
    (tmp_path / "out.json").write_text(json.dumps([{"file": "out_0.bin", "shape": [4], "dtype": "float32"}]))
    outs, why = _read_outputs(str(tmp_path), torch.device("cpu"))
    assert outs is None and "12 bytes" in why
    (tmp_path / "out.json").write_text(json.dumps([{"file": "../x", "shape": [4], "dtype": "float32"}]))
    assert _read_outputs(str(tmp_path), torch.device("cpu"))[0] is None


def test_the_scratch_folder_is_in_memory_only_while_what_crosses_it_is_a_small_share_of_what_is_free(monkeypatch):
    from kforge_worker.checks import budget, disguised

    import pytest

    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm on this host")
    monkeypatch.setattr(budget, "host_available", lambda: 8 << 30)
    room = __import__("shutil").disk_usage("/dev/shm").free
    small = int(0.1 * min(8 << 30, room))
    assert disguised.scratch_parent(small) == "/dev/shm"
    assert disguised.scratch_parent(int(0.3 * min(8 << 30, room)) + 1) is None
    monkeypatch.setattr(budget, "host_available", lambda: None)  # unknown: not in memory
    assert disguised.scratch_parent(small) is None
