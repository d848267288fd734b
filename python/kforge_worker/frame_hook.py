"""dynamo's frame-evaluation hook, kept out of the harness's own frames.

`torch._C._dynamo.eval_frame.set_eval_frame(callback)` is a C setter (no audit event). While a callback is
installed, every Python frame the thread enters is shown to it first, with its arguments and free variables
(the harness's evaluation context included), and the callback may hand back other code to run for that frame.
A candidate that installs one owns the harness's later frames and the worker's copy of the reference (its
`nn.Linear.forward` sees a rewritten input); no Python object of torch's is rebound, so no fingerprint of
functions sees it. torch.compile installs it only for the span of a compiled call.

So right after control comes back from the candidate's code (its import, construction, every call the
harness makes through `context.run`, `EvalContext.guard_candidate` and the timed call), the harness takes the
hook away with the C setter itself, from the frame that is already running (a Python helper would be a new
frame, shown to the hook first), and records that one was left (`left`). The process fingerprint reports a
record, and an installed hook, as a change (`integrity._process_flags`): `harness_integrity` fails.

Usage at a call site (no Python frame is entered between the candidate's return and the take):

    out = fn()
    if frame_hook.take is not None and frame_hook.take(None) is not None:
        frame_hook.left.append("what was called")
"""

from __future__ import annotations

from typing import Any

take: Any = None  # torch._C._dynamo.eval_frame.set_eval_frame, bound by bind() before the candidate exists
peek: Any = None  # torch._C._dynamo.eval_frame.get_eval_frame_callback
left: list[str] = []  # where a hook was found left installed after the candidate's code returned


def bind() -> None:
    """Binds the C setter and getter (torch imported, the candidate not yet). Idempotent; a torch without dynamo
    leaves both None."""
    global take, peek
    if take is not None:
        return
    try:
        import torch

        module = torch._C._dynamo.eval_frame
        take, peek = module.set_eval_frame, module.get_eval_frame_callback
    except Exception:  # noqa: BLE001
        take = peek = None
