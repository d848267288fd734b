"""Red team round 4 (2026-11-25, third session): the reference process frozen or deprioritised from outside
without burning CPU, and torch's own wiring (module-valued globals, code objects) rebound under the worker's
reference. See bench/verify/NOTES.md, "red team round 4"."""

from __future__ import annotations

import os
import signal
import sys

import torch
import torch.nn.functional as F


# ------------------------------------------------------------------ torch's wiring
def test_a_module_global_of_torch_rebound_is_a_wiring_change():
    """nn.Linear.forward looks up `F` in torch.nn.modules.linear's globals: a module, not a callable, so the
    function fingerprint never saw it rebound. The wiring fingerprint does; torch's lazy imports do not count."""
    from kforge_worker.checks.torch_wiring import wiring, wiring_changes

    before = wiring()
    linear_module = sys.modules["torch.nn.modules.linear"]
    real = linear_module.F
    import types

    stand = types.ModuleType("torch.nn.functional")
    try:
        linear_module.F = stand
        changes = wiring_changes(before)
        assert any("torch.nn.modules.linear.F was rebound" in c for c in changes), changes
    finally:
        linear_module.F = real
    import torch.nn.utils.parametrize  # noqa: F401 — a torch module imported after the snapshot
    assert wiring_changes(before) == []


def test_a_swapped_code_object_under_the_same_function_is_a_wiring_change():
    """The function object (and its identity) stays: only its __code__ changes. Seen for the fingerprint's
    functions (given by the caller) and for the callables of torch.nn's modules."""
    from kforge_worker.checks.torch_wiring import wiring, wiring_changes

    target = torch.nn.Linear.forward
    before = wiring({"torch.nn.Linear.forward": target})
    original = target.__code__

    def other(self, input):
        return F.linear(input, self.weight, self.bias) * 0

    try:
        target.__code__ = other.__code__
        changes = wiring_changes(before)
        assert any("torch.nn.Linear.forward.__code__ was replaced" in c for c in changes), changes
    finally:
        target.__code__ = original
    assert wiring_changes(before) == []


def test_a_rebound_function_of_torchs_c_submodules_is_a_wiring_change():
    """F.leaky_relu looks up torch._C._nn.leaky_relu when called: rebinding it changes the reference's op."""
    from kforge_worker.checks.torch_wiring import wiring, wiring_changes

    before = wiring()
    real = torch._C._nn.leaky_relu
    try:
        torch._C._nn.leaky_relu = lambda x, slope=0.01: torch.relu(x)
        assert F.leaky_relu(torch.tensor([-1.0])).item() == 0.0  # the reference's path really changed
        assert any("torch._C._nn.leaky_relu was rebound" in c for c in wiring_changes(before))
    finally:
        torch._C._nn.leaky_relu = real
    assert wiring_changes(before) == []


def test_the_wiring_is_part_of_the_process_fingerprint():
    from kforge_worker.checks.integrity import IntegritySnapshot

    snap = IntegritySnapshot.take()
    linear_module = sys.modules["torch.nn.modules.linear"]
    real = linear_module.F
    try:
        linear_module.F = object()
        assert any("torch.nn.modules.linear.F was rebound" in c for c in snap.diff(thorough=False))
    finally:
        linear_module.F = real
    assert not any("rebound" in c or "(same function object)" in c for c in snap.diff(thorough=False))


# ------------------------------------------------------------------ the reference process, from outside
def test_a_scheduling_policy_change_is_interference():
    """SCHED_IDLE keeps the cores and the niceness the comparison looked at; the policy is compared too."""
    from kforge_worker.interference import scheduling, scheduling_change

    mine = scheduling(os.getpid())
    base = mine[os.getpid()]
    assert len(base) == 3
    assert scheduling_change(base, mine) is None
    idle = {tid: (s[0], s[1], getattr(os, "SCHED_IDLE", 5)) for tid, s in mine.items()}
    assert "SCHED_IDLE" in scheduling_change(base, idle)
    assert scheduling_change(base[:2], idle) is None  # a two-field baseline compares what it has


def test_a_moved_control_group_is_interference():
    from kforge_worker.interference import cgroup, cgroup_change

    mine = cgroup(os.getpid())
    if mine is None:
        return  # no /proc here
    assert cgroup_change(mine, os.getpid()) is None
    assert "control group" in cgroup_change(mine + "0::/elsewhere\n", os.getpid())


def test_stops_and_tracers_of_the_reference_process_are_reported():
    """SIGSTOP cannot be caught, the SIGCONT that ends it can: the child counts them and says so in every timing
    reply; the worker fails reference_interference on the first."""
    from kforge_worker import reference_process as rp
    from kforge_worker.interference import IdleMeter

    previous = signal.getsignal(signal.SIGCONT)
    saved = dict(rp._OUTSIDE)
    try:
        rp.guard_from_outside("cuda")  # "cuda": the dumpable switch is left alone in the test's own process
        assert rp.outside_change(rp.outside_report()) is None
        os.kill(os.getpid(), signal.SIGCONT)
        report = rp.outside_report()
        assert report["continued"] >= 1
        reason = rp.outside_change(report)
        assert reason and "stopped and continued" in reason
        assert "traced" in rp.outside_change({"continued": 0, "tracer": 1234})
        meter = IdleMeter()
        meter.tampered = reason
        assert meter.check("PASSIVE")["outcome"] == "fail"
    finally:
        signal.signal(signal.SIGCONT, previous)
        rp._OUTSIDE.clear()
        rp._OUTSIDE.update(saved)


def test_the_reference_process_on_the_cpu_cannot_be_attached_to():
    """On the CPU the child makes itself non-dumpable: same-user ptrace and /proc/<pid>/mem are refused, while
    what the worker reads of it (its threads' scheduling, its cgroup) still works."""
    import subprocess

    code = ("from kforge_worker.reference_process import guard_from_outside\n"
            "guard_from_outside('cpu')\nimport ctypes, sys\n"
            "sys.stdout.write('ready %d\\n' % ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))\nsys.stdout.flush()\n"
            "sys.stdin.readline()\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "ready 0"  # PR_GET_DUMPABLE: 0
        from kforge_worker.interference import cgroup, scheduling

        assert proc.pid in scheduling(proc.pid)
        assert cgroup(proc.pid) is not None or not os.path.exists("/proc/self/cgroup")
        if os.geteuid() != 0:  # root (CAP_SYS_PTRACE) may attach to anything: nothing to show there
            try:
                with open(f"/proc/{proc.pid}/mem", "rb"):
                    opened = True
            except OSError:
                opened = False
            assert not opened
    finally:
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=10)


# ------------------------------------------------------------------ state checks with extra state_dict keys
class _Lin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gemm = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.gemm(x))


class _Folded(_Lin):
    """Folded at __init__ into an extra buffer: loaded weights are ignored."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w_t", self.gemm.weight.detach().t().contiguous())

    def forward(self, x):
        return torch.relu(torch.addmm(self.gemm.bias, x, self.w_t))


class _Refreshed(_Folded):
    def forward(self, x):
        with torch.no_grad():
            self.w_t.copy_(self.gemm.weight.t())
        return super().forward(x)


def _state_context(cand):
    import random

    from kforge_worker.checks import context
    from kforge_worker.checks.instrument import ExtensionRecorder
    from kforge_worker.checks.static_scan import ScanReport

    torch.manual_seed(0)
    ref = _Lin()
    cand.load_state_dict(ref.state_dict(), strict=False)
    with torch.no_grad():
        cand.w_t.copy_(cand.gemm.weight.t())
    return context.VerifyContext(ref=ref, cand=cand,
                                 make_inputs=lambda s: [torch.randn(6, 8, generator=torch.Generator().manual_seed(s))],
                                 device=torch.device("cpu"), atol=1e-4, rtol=1e-4,
                                 scan=ScanReport("c.py", frozenset()), extensions=ExtensionRecorder(),
                                 rng=random.Random(3))


def test_an_extra_state_dict_key_no_longer_skips_state_reload():
    """One buffer more than the reference's (a folded copy) used to skip state_reload: the reference's entries are
    now loaded into the candidate (strict=False), and what it derived from them must follow."""
    from kforge_worker.checks.state_checks import check_state

    folded = {r.name: r for r in check_state(_state_context(_Folded()))}
    assert folded["state_reload"].outcome == "fail", folded["state_reload"]
    assert "w_t" in folded["state_reload"].evidence
    refreshed = {r.name: r for r in check_state(_state_context(_Refreshed()))}
    assert refreshed["state_reload"].outcome == "pass", refreshed["state_reload"]


# ------------------------------------------------------------------ processes the candidate leaves running
def test_a_detached_process_left_running_while_the_reference_is_timed_is_interference():
    """A process forked, setsid and forked again escapes to init — unless the worker is its subreaper, which it
    makes itself before the candidate is imported; then it stays a child, and any live child other than the
    reference process is work the idle meter (this process's CPU time) cannot see."""
    import subprocess

    code = (
        "import os, sys, time\n"
        "from kforge_worker.interference import adopt_orphans, adopting, children_change, foreign_children\n"
        "assert adopt_orphans() and adopting()\n"
        "assert children_change(set(), True) is None\n"
        "r, w = os.pipe()\n"
        "first = os.fork()\n"
        "if first == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.close(r); os.write(w, b'x'); time.sleep(3); os._exit(0)\n"
        "    os._exit(0)\n"
        "os.waitpid(first, 0)  # the intermediate, reaped (an unreaped one is an ended child: round 5)\n"
        "os.read(r, 1)\n"
        "time.sleep(0.2)\n"
        "others = foreign_children(set())\n"
        "reason = children_change(set(), True)\n"
        "print(len(others), 'other process' in (reason or ''), children_change(set(others), True) is None)\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "True", "True"], out.stdout
