"""A timed pair off the distribution fails on rows far off the reference's; a row whose exact value nearly cancels is
far off in relative terms for any rounding, so such rows are judged against float64 before they are charged
(compare.far_rows_are_rounding) — while a wrong row still fails."""

import torch

from kforge_worker.compare import compare_timed, far_rows, far_rows_are_rounding, rounding_against
from kforge_worker.checks.float64 import Float64Eval


def _sum_of_linear(seed: int = 0, rows: int = 256, features: int = 2048):
    """(reference, candidate, float64) of sum(x @ W.T, 1) — the reference sums the products, the candidate multiplies
    by the summed weights (the same function, rounded otherwise) — with row 7 built to cancel almost exactly."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, features, generator=g) * 1e4
    w = torch.randn(features, features, generator=g) / features**0.5
    s = w.double().sum(0)
    x64 = x.double()
    x64[7] -= (x64[7] @ s) / (s @ s) * s  # exact sum ~0 on row 7
    x = x64.float()
    ref = (x @ w.T).sum(1, keepdim=True)
    cand = (x @ w.sum(0)).unsqueeze(1)
    ref64 = (x.double() @ w.double().T).sum(1, keepdim=True)
    return ref, cand, ref64


def test_a_cancelling_row_is_far_off_in_relative_terms_but_rounding_against_float64():
    ref, cand, ref64 = _sum_of_linear()
    far = far_rows(cand, ref, 1e-4)
    assert 7 in [r for r, _ in far]
    assert far_rows_are_rounding(cand, ref, ref64, far)
    view = Float64Eval([ref64])
    ok, why = compare_timed(0, cand, ref, 1e-4, 1e-4, True, None, rounding_against(lambda: view))
    assert ok, why
    ok, why = compare_timed(0, cand, ref, 1e-4, 1e-4, True, None)
    assert not ok and "far off" in why


def test_a_wrong_row_is_not_rounding():
    ref, cand, ref64 = _sum_of_linear(seed=1)
    for wrong in (lambda c: c[3].zero_(), lambda c: c[3].copy_(c[4]), lambda c: c[7].add_(ref[3].abs()),
                  lambda c: c[3].mul_(1.05)):
        bad = cand.clone()
        wrong(bad)
        far = far_rows(bad, ref, 1e-4)
        assert 3 in [r for r, _ in far] or 7 in [r for r, _ in far]
        assert not far_rows_are_rounding(bad, ref, ref64, far)


def test_rows_outside_the_float64_window_or_an_untrusted_float64_forgive_nothing():
    ref, cand, ref64 = _sum_of_linear(seed=2)
    far = far_rows(cand, ref, 1e-4)
    assert 7 in [r for r, _ in far]
    # the window covers rows 100:200 only: row 7 cannot be judged
    assert not far_rows_are_rounding(cand, ref, ref64[100:200], far, (100, 200))
    assert far_rows_are_rounding(cand, ref, ref64[0:100], far, (0, 100))
    # a float64 evaluation the reference itself does not agree with (another function: state it did not follow)
    assert not far_rows_are_rounding(cand, ref, ref64 * 1.1, far)


def test_the_judge_forgives_a_cancelling_row_by_its_float64_and_still_counts_a_wrong_one(tmp_path):
    import os
    import random

    from kforge_worker.judge import Judge, JudgeChannel, summarize
    from kforge_worker.reference_process import Exporter

    class Always(random.Random):
        def random(self) -> float:
            return 0.0

    ref, cand, ref64 = _sum_of_linear(seed=3)
    channel = JudgeChannel()
    judge = Judge(channel.child_fd, str(tmp_path / "own"), rng=Always())
    judge.start(os.getpid(), dropout=False)
    judge.atol = judge.rtol = 1e-4
    exporter = Exporter(str(tmp_path))
    asked = []

    def float64():
        asked.append(1)
        return Float64Eval([ref64])

    wrong = cand.clone()
    wrong[3] = 0.0
    for name, out in (("rounded", cand), ("wrong", wrong)):
        judge.called()
        judge.commit([{"tensor": exporter.put(name, out, staging=True)}], [ref], torch.device("cpu"), varied=True,
                     float64=float64)
    judge.end()
    end = summarize(channel.finish(), channel.nonce)["end"]
    assert end["sampled"] == 2 and end["wrong"] == 1 and len(asked) == 2
