"""Red team round 6 (issue 15, 2026-11-28): holes found on the CPU and the general defences that close them."""

from __future__ import annotations

import random

import torch
from torch import nn

from kforge_worker.checks import context
from kforge_worker.checks.input_checks import _drawn_like, _occurrences, check_extra_shapes
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.static_scan import ScanReport


def _context(ref: nn.Module, cand: nn.Module, make_inputs) -> context.VerifyContext:
    return context.VerifyContext(ref=ref, cand=cand, make_inputs=make_inputs, device=torch.device("cpu"),
                                 atol=1e-4, rtol=1e-4, scan=ScanReport("c.py", frozenset()),
                                 extensions=ExtensionRecorder(), rng=random.Random(6))


# ------------------------------------------------------------------------ a batch of one or two
class _Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class _TwoImageGrid(nn.Module):
    """A grid over the benchmark's two images and no more: right at a batch of 1 or 2, zeros past the second."""

    def forward(self, x):
        out = torch.zeros_like(x)
        out[:2] = torch.softmax(x[:2], dim=-1)
        return out


def _pair(seed: int):
    return [torch.randn(2, 24, 64, generator=torch.Generator().manual_seed(seed))]


def test_a_batch_of_two_is_grown_and_a_grid_baked_to_it_fails():
    assert 2 in _occurrences(_pair(0)) and 1 in _occurrences([torch.randn(1, 24, 64)])
    assert 2 not in _occurrences([torch.randn(24, 2, 64)])  # a size of 2 elsewhere is the problem's meaning
    result = check_extra_shapes(_context(_Softmax(), _TwoImageGrid(), _pair))
    assert result.outcome == "fail" and result.fail_verdict == "incorrect", result.evidence
    assert "2->3" in result.evidence
    honest = check_extra_shapes(_context(_Softmax(), _Softmax(), _pair))
    assert honest.outcome == "pass" and "2->3: ok" in honest.evidence, honest.evidence


def test_a_batch_of_one_is_grown_and_never_shrunk_to_nothing():
    def one(seed: int):
        return [torch.randn(1, 24, 64, generator=torch.Generator().manual_seed(seed))]

    result = check_extra_shapes(_context(_Softmax(), _TwoImageGrid(), one))
    assert result.outcome == "fail" and "1->" in result.evidence, result.evidence
    honest = check_extra_shapes(_context(_Softmax(), _Softmax(), one))
    assert honest.outcome == "pass" and "1->2: ok" in honest.evidence and "1->0" not in honest.evidence


# ------------------------------------------------------------------------ probes that look like get_inputs()
class _Log2(nn.Module):
    def forward(self, x):
        return torch.log(x) * 2.0


class _RaisesOnProbes(nn.Module):
    """Specialised to 64 rows (zeros beyond). When the values look like a resized probe's (all in [0, 1) where
    get_inputs() draws randn) it raises, which extra_shapes reads as "specialised, but not wrong"."""

    def forward(self, x):
        if x.shape[0] != 64 and bool((x >= 0).all()):
            raise RuntimeError("unsupported shape")
        out = torch.zeros_like(x)
        out[:64] = torch.log(x[:64]) * 2.0
        return out


def _signed(seed: int):
    return [torch.randn(64, 32, generator=torch.Generator().manual_seed(seed))]


def test_probes_of_other_sizes_draw_from_get_inputs_own_distribution():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(2)) * 3 + 1
    drawn = _drawn_like(x, [97, 256], gen)
    assert drawn.shape == (97, 256) and drawn.dtype == x.dtype
    assert bool((drawn < 0).any()) and abs(float(drawn.mean()) - 1) < 0.1 and abs(float(drawn.std()) - 3) < 0.1
    assert drawn.min() >= x.min() and drawn.max() <= x.max()
    assert drawn.unique().numel() > 0.99 * drawn.numel()  # interpolated, not resampled: no value repeated
    half = _drawn_like(torch.rand(8, 8, dtype=torch.float16), [3, 8], gen)
    assert half.dtype == torch.float16 and bool(((half >= 0) & (half <= 1)).all())


def test_a_candidate_that_raises_only_on_probe_looking_inputs_is_caught():
    result = check_extra_shapes(_context(_Log2(), _RaisesOnProbes(), _signed))
    assert result.outcome == "fail" and result.fail_verdict == "incorrect", result.evidence
    honest = check_extra_shapes(_context(_Log2(), _Log2(), _signed))
    assert honest.outcome == "pass", honest.evidence


# ------------------------------------------------------------------------ the reference's shared files
def _shared_output(tmp_path):
    from kforge_worker.reference_process import Exporter, Importer

    exporter, importer = Exporter(str(tmp_path)), Importer()
    out = torch.randn(8, 16)
    desc = exporter.put("o64_0", out.double(), staging=False)
    view = importer.view(desc)
    return desc, view, importer, out


def test_a_shared_output_written_in_place_breaks_the_seal(tmp_path):
    desc, view, importer, out = _shared_output(tmp_path)
    seal = importer.seal(("out", "o64_"))
    assert seal and importer.broken(seal) == []
    forged = torch.from_file(desc["path"], shared=True, size=out.numel(), dtype=torch.float64)
    forged.add_(1e6)  # another process's mapping: the worker's view sees the write
    assert float(view.reshape(-1)[0]) > 1e5
    assert importer.broken(seal) == ["o64_0.float64"]


def test_a_shared_output_replaced_under_its_name_breaks_the_seal(tmp_path):
    import os

    from kforge_worker.reference_process import Exporter, Importer

    exporter, importer = Exporter(str(tmp_path)), Importer()
    out = torch.randn(8, 16, dtype=torch.float64)
    desc = exporter.put("o64_0", out, staging=False)
    os.unlink(desc["path"])  # a new file under the name, holding what the candidate wants the worker to map
    (tmp_path / os.path.basename(desc["path"])).write_bytes((out + 1e6).numpy().tobytes())
    view = importer.view(desc)
    assert float(view.reshape(-1)[0]) > 1e5
    assert importer.broken(importer.seal(("o64_",))) == ["o64_0.float64"]


def test_staged_inputs_carry_no_digest_and_outputs_do(tmp_path):
    from kforge_worker.reference_process import Exporter

    exporter = Exporter(str(tmp_path))
    assert "digest" not in exporter.put("stage0", torch.randn(4), staging=True)
    assert len(exporter.put("out0", torch.randn(4), staging=False)["digest"]) == 128


# ------------------------------------------------------------------------ a thread count set and put back
def test_a_thread_count_set_inside_forward_warns_and_the_fingerprint_decides():
    from kforge_worker.checks.static_scan import scan_source

    source = ("import torch\n"
              "def forward(x):\n"
              "    before = torch.get_num_threads()\n"
              "    torch.set_num_threads(1)\n"
              "    try:\n"
              "        return x * 2\n"
              "    finally:\n"
              "        torch.set_num_threads(before)\n")
    findings = [f for f in scan_source(source, "c.py").findings if "set_num_threads" in f.message]
    assert len(findings) == 2 and all(f.severity == "warn" for f in findings), findings
    others = scan_source("import torch\ntorch.cuda.set_sync_debug_mode(1)\n", "c.py").findings
    assert any(f.severity == "fail" for f in others)  # a switch no fingerprint reads still fails


# ------------------------------------------------------------------------ a candidate slow where it is probed
class _Relu(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class _SlowWhereProbedUpTo96(nn.Module):
    """Right up to 96 rows (twice the benchmark's 48), zeros beyond; slow at every size but the benchmark's, so a
    projection from its own time rules the sizes well above out."""

    def forward(self, x):
        if x.shape[0] != 48:
            import time

            time.sleep(0.25)
        out = torch.zeros_like(x)
        out[:96] = torch.relu(x[:96])
        return out


def _rows(seed: int):
    return [torch.randn(48, 8, generator=torch.Generator().manual_seed(seed))]


def test_sizes_well_above_are_priced_by_the_reference_not_by_the_candidate():
    result = check_extra_shapes(_context(_Relu(), _SlowWhereProbedUpTo96(), _rows), well_above_seconds=0.5)
    assert result.outcome == "fail" and "48->193" in result.evidence, result.evidence


# ------------------------------------------------------------------------ interpreter internals named in strings
def test_interpreter_internals_named_in_strings_or_computed_vars_keys_fail_statically():
    from kforge_worker.checks.static_scan import scan_source

    for source in ('x = vars(type)["__subclasses__"](object)',
                   'import types\ng = vars(types.FunctionType)["__globals__"]',
                   'x = type.__dict__["__subclasses__"]',
                   'x = vars(type)["__sub" + "classes__"]'):
        findings = scan_source(source, "c.py").findings
        assert any(f.rule == "evasion" and f.severity == "fail" for f in findings), (source, findings)
    honest = scan_source('w = vars(self)["weight"]\nfor k in vars(cfg):\n    pass\nname = "__init__"\n', "c.py")
    assert not honest.findings, honest.findings


def test_the_audit_record_sends_a_copy_of_each_event_out_as_it_is_recorded(monkeypatch):
    from kforge_worker.checks import integrity

    sent: list[str] = []
    monkeypatch.setattr(integrity, "_AUDIT_SINK", sent.append)
    record = integrity._Record()
    record.append(integrity.AuditEvent("evasion", "ctypes.dlopen", "c.py:3", "None"))
    record.clear()  # what the candidate can do to the record in its own process
    assert sent == ["c.py:3: ctypes.dlopen None"] and list(record) == []
