"""State semantics: train/eval modes, reloading fresh parameters, and buffers after several calls."""

from __future__ import annotations

import math
import random

from typing import Any

import torch
import torch.nn as nn

from ..compare import AS_ACCURATE_MULTIPLE

from .context import (
    _equal,
    clone_inputs,
    handed_state,
    has_dropout,
    mode_dependent,
    preserved_state,
    run,
    same_values,
    VerifyContext,
)
from .float64 import float64_copy, widen
from .judge import judged_compare
from .result import CheckResult, failed, passed, skipped, warned


def _written_in_place(ctx: VerifyContext, gen: torch.Generator, pairs: dict[str, str] | None = None) -> str | None:
    """The parameters both models share by name written in place (``copy_`` into the state_dict's tensors, which
    are the parameters' own storage and version counter), as an optimizer's step or a user's ``p.copy_`` changes
    them without load_state_dict; why the candidate's output is then wrong, or None. Red team round 8
    (adv_load_hook_cache): a weight copy refreshed only by a load_state_dict hook passed every round trip."""
    pairs = pairs or {}
    cand_state = _renamed_back(ctx.cand.state_dict(), pairs)
    names = [k for k, _ in ctx.ref.named_parameters() if k in cand_state]
    ref_state = ctx.ref.state_dict()
    written = 0
    with torch.no_grad():
        for k in names:
            r, c = ref_state[k], cand_state[k]
            if not r.is_floating_point() or r.shape != c.shape or r.dtype != c.dtype:
                continue
            scale = float(r.float().std()) if r.numel() > 1 and float(r.float().std()) > 0 else 0.5
            value = (torch.randn(r.shape, generator=gen, dtype=torch.float32) * scale).to(r.dtype).to(r.device)
            r.copy_(value)
            c.copy_(value.to(c.device))
            written += 1
    if not written:
        return None
    inputs = ctx.make_inputs(ctx.seed())
    c = judged_compare(ctx, inputs, run(ctx.cand, clone_inputs(inputs)), run(ctx.ref, clone_inputs(inputs)))
    return None if c.ok else (f"after {written} parameter(s) were written in place (copy_, as an optimizer's step "
                              f"writes them; no load_state_dict): {c.message}")


# Parameters moved one at a time by _written_in_part (the largest first): each costs a forward pair.
PARTIAL_WRITES = 4


def _renamed_back(cand_state: dict[str, Any], pairs: dict[str, str]) -> dict[str, Any]:
    """The candidate's state_dict with its entries paired to the reference's (paired_keys) under the reference's names
    (the tensors themselves: writes into them are writes into the candidate's parameters)."""
    back = {c: k for k, c in pairs.items()}
    return {back.get(k, k): v for k, v in cand_state.items()}


def _written_in_part(ctx: VerifyContext, gen: torch.Generator, pairs: dict[str, str] | None = None) -> str | None:
    """One element of a parameter both models share by name moved in place (at a secret position, by a few times the
    parameter's spread), as a pruning mask, a fine-tuned row or a sparse update changes some weights and leaves the
    rest; why the candidate's output is then wrong, or None. Every other write the checks make replaces all values,
    so a cache keyed on a sample of the values (red team round 14, adv_weight_sample_key) always saw its sample move;
    a cache keyed on the version counter follows a write of any size. One parameter at a time (up to PARTIAL_WRITES,
    the largest first): a cache refreshed when any sampled element moves would be refreshed by the luck of one
    parameter's draw if all moved at once."""
    cand_state = _renamed_back(ctx.cand.state_dict(), pairs or {})
    ref_state = ctx.ref.state_dict()
    names = [k for k, _ in ctx.ref.named_parameters() if k in cand_state]
    names = [k for k in names if ref_state[k].is_floating_point() and ref_state[k].numel() > 0
             and ref_state[k].shape == cand_state[k].shape and ref_state[k].dtype == cand_state[k].dtype
             and ref_state[k].is_contiguous() and cand_state[k].is_contiguous()]
    names.sort(key=lambda k: -ref_state[k].numel())
    for k in names[:PARTIAL_WRITES]:
        r, c = ref_state[k], cand_state[k]
        with torch.no_grad():
            at = int(torch.randint(r.numel(), (1,), generator=gen))
            spread = float(r.float().std()) if r.numel() > 1 else 0.0
            value = (r.reshape(-1)[at].float() + 4.0 * (spread if spread > 0 else 0.5)).to(r.dtype)
            r.view(-1)[at] = value
            c.view(-1)[at] = value.to(c.device)
        inputs = ctx.make_inputs(ctx.seed())
        cmp = judged_compare(ctx, inputs, run(ctx.cand, clone_inputs(inputs)), run(ctx.ref, clone_inputs(inputs)))
        if not cmp.ok:
            return (f"after one element of {k} was changed in place (as a pruning mask or a sparse update changes "
                    f"some weights): {cmp.message}")
    return None


def _parameters_rewritten(ctx: VerifyContext, loaded: dict[str, torch.Tensor],
                          pairs: dict[str, str] | None = None) -> str | None:
    """After forwards on the parameters just loaded into both models: the candidate's parameters must still hold what
    was loaded wherever the reference's do. A forward that rewrites its own weights in place (relaid into another
    layout, folded, pre-scaled) answers right and leaves a state_dict a user's checkpoint saves as garbage (red team
    round 10, adv_param_relayout). Bitwise (NaN equal to NaN): a parameter is data, not a result."""
    ref_params = dict(ctx.ref.named_parameters())
    cand_state = _renamed_back(ctx.cand.state_dict(), pairs or {})
    moved = []
    for k, value in loaded.items():
        r, c = ref_params.get(k), cand_state.get(k)
        if r is None or c is None or c.shape != value.shape or c.dtype != value.dtype:
            continue
        if not same_values(r.detach(), value):
            continue  # the reference's own forward changes this parameter: the candidate's may change too
        if not same_values(c.detach().to(value.device), value):
            n = int((torch.nan_to_num(c.detach().to(value.device)) != torch.nan_to_num(value)).sum())
            moved.append(f"{k} ({n}/{value.numel()} elements)")
    if not moved:
        return None
    return ("the candidate's forward rewrote its own parameters, which the reference's leaves as loaded: "
            + ", ".join(moved[:4]) + " — its state_dict no longer holds the model's weights (a checkpoint saved from "
            "it is wrong)")


def paired_keys(ref: nn.Module, cand: nn.Module) -> dict[str, str]:
    """The reference's state_dict keys mapped to the candidate's entries that hold them: the same name, else — for a
    candidate that registers the weights under names of its own (the harness then syncs the pair by seed, both built
    from it) — the one entry of the candidate's, under no reference name, holding bitwise the same values (shape,
    dtype). A value several entries hold on either side is left unpaired (two zero biases, say). Red team round 15
    (adv_renamed_folded): renamed weights, folded at __init__ into plain attributes, skipped every reload check ("keys
    differ, parameters cannot be swapped"), so a checkpoint loaded into ModelNew or a training step changed nothing."""
    ref_state = ref.state_dict()
    cand_state = cand.state_dict()
    pairs = {k: k for k in ref_state if k in cand_state}
    left = [k for k in cand_state if k not in ref_state and isinstance(cand_state[k], torch.Tensor)]
    found: dict[str, list[str]] = {}
    for k, r in ref_state.items():
        if k in pairs or not isinstance(r, torch.Tensor):
            continue
        found[k] = [c for c in left if cand_state[c].shape == r.shape and cand_state[c].dtype == r.dtype
                    and same_values(cand_state[c].detach().to(r.device), r.detach())]
    claimed: dict[str, int] = {}
    for matches in found.values():
        for c in matches:
            claimed[c] = claimed.get(c, 0) + 1
    for k, matches in found.items():
        if len(matches) == 1 and claimed[matches[0]] == 1:
            pairs[k] = matches[0]
    return pairs


def _renamed(state: dict[str, Any], pairs: dict[str, str]) -> dict[str, Any]:
    """A state_dict of the reference's keys under the candidate's names for them (paired_keys)."""
    from collections import OrderedDict

    return OrderedDict((pairs.get(k, k), v) for k, v in state.items())


def check_state(ctx: VerifyContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    ref_keys = set(ctx.ref.state_dict().keys())
    cand_keys = set(ctx.cand.state_dict().keys())
    same_keys = ref_keys == cand_keys and bool(ref_keys)
    # Every key of the reference's is also the candidate's (it keeps more: a cache, a folded copy registered as a
    # buffer): the reference's entries can still be loaded into it, as a user's load_state_dict(strict=False) would,
    # and what it derived from them must follow. One extra buffer used to skip these checks altogether.
    shared_keys = bool(ref_keys) and ref_keys <= cand_keys
    # Every reference entry has a candidate entry that holds it, by name or by value (paired_keys): its parameters can
    # be swapped (state_reload) under the candidate's own names.
    pairs = paired_keys(ctx.ref, ctx.cand) if ref_keys else {}
    reloadable = bool(ref_keys) and set(pairs) == ref_keys
    renamed = {k: c for k, c in pairs.items() if k != c}
    renamed_note = (f" (the candidate's own names for {len(renamed)} of them, paired by their values: "
                    f"{', '.join(f'{c} for {k}' for k, c in list(renamed.items())[:3])})") if renamed else ""
    extra = sorted(cand_keys - ref_keys - set(pairs.values()))
    extra_note = (f" (the candidate's own {len(extra)} extra state_dict entr{'y' if len(extra) == 1 else 'ies'} "
                  f"{', '.join(extra[:3])} left as they are)") if extra else ""
    dependent = mode_dependent(ctx.ref)

    # train/eval — for every reference (red team round 11, adv_eval_mode_wrong): one without mode-dependent layers
    # answers the same in both modes, and the harness builds both models in training mode, so a candidate that reads
    # self.training was checked in one mode only.
    bad = []
    with preserved_state(ctx.ref, ctx.cand):
        for mode in ("eval", "train"):
            getattr(ctx.ref, mode)()
            getattr(ctx.cand, mode)()
            if mode == "train" and has_dropout(ctx.ref):
                continue
            inputs = ctx.make_inputs(ctx.seed())
            c = judged_compare(ctx, inputs, run(ctx.cand, clone_inputs(inputs)), run(ctx.ref, clone_inputs(inputs)))
            if not c.ok:
                bad.append(f"{mode} mode: {c.message}")
    layers = f"mode-dependent layers: {', '.join(dependent)}" if dependent else "no mode-dependent layers"
    if bad:
        results.append(failed("state_train_eval", "; ".join(bad) + f" ({layers})", "incorrect"))
    else:
        results.append(passed("state_train_eval", f"train and eval mode both match ({layers})", "incorrect"))

    # load_state_dict with fresh random parameters
    if not reloadable:
        results.append(skipped("state_reload", "state_dict keys differ from the reference's (and not every entry of "
                               "the reference's is held by one of the candidate's): parameters cannot be swapped",
                               "incorrect"))
    else:
        with preserved_state(ctx.ref, ctx.cand):
            gen = torch.Generator(device="cpu").manual_seed(ctx.seed())
            fresh = {}
            for k, v in ctx.ref.state_dict().items():
                if v.is_floating_point():
                    noise = torch.randn(v.shape, generator=gen, dtype=torch.float32)
                    scale = float(v.float().std()) if v.numel() > 1 and float(v.float().std()) > 0 else 0.5
                    mean = float(v.float().mean()) if v.numel() else 0.0
                    if "running_var" in k or k.endswith(".var"):
                        value = (noise.abs() * 0.5 + 0.5)
                    else:
                        value = noise * scale + mean + (0.3 if v.numel() == 1 else 0.0)
                    fresh[k] = value.to(v.dtype).to(v.device)
                else:
                    fresh[k] = v.clone()
            # the candidate's own copy, under its names: `fresh` stays what both were meant to load
            handed = handed_state(_renamed(fresh, pairs))
            try:
                ctx.ref.load_state_dict(fresh)
                ctx.cand.load_state_dict(handed, strict=same_keys)
            except Exception as exc:  # noqa: BLE001
                results.append(failed("state_reload", f"load_state_dict failed: {type(exc).__name__}: {exc}"[:300],
                                      "incorrect"))
            else:
                bad = []
                modes = ("train", "eval") if dependent else ("current",)
                for mode in modes:
                    if mode != "current":
                        ctx.ref.train(mode == "train")
                        ctx.cand.train(mode == "train")
                    if mode == "train" and has_dropout(ctx.ref):
                        continue
                    inputs = ctx.make_inputs(ctx.seed())
                    c = judged_compare(ctx, inputs, run(ctx.cand, clone_inputs(inputs)),
                                       run(ctx.ref, clone_inputs(inputs)))
                    if not c.ok:
                        bad.append(f"{mode}: {c.message}")
                written = [pairs[k] for k, v in fresh.items() if isinstance(v, torch.Tensor) and pairs[k] in handed
                           and not _same_bits(handed[pairs[k]], v)]
                if written:
                    bad.append(f"load_state_dict wrote into the tensors it was handed ({', '.join(written[:4])}): a "
                               "caller's checkpoint is changed by loading it")
                if not bad:
                    rewritten = _parameters_rewritten(ctx, fresh, pairs)
                    if rewritten is not None:
                        bad.append(rewritten)
                if not bad:
                    inplace = _written_in_place(ctx, gen, pairs) or _written_in_part(ctx, gen, pairs)
                    if inplace is not None:
                        bad.append(inplace)
                if bad:
                    results.append(failed("state_reload", "after load_state_dict with fresh random parameters the "
                                          "output is wrong (parameters folded or cached at __init__): " + "; ".join(bad)
                                          + extra_note + renamed_note, "incorrect"))
                else:
                    results.append(passed("state_reload", "matches after load_state_dict with fresh random parameters"
                                          " and after parameters written in place" + extra_note + renamed_note,
                                          "incorrect"))

    # buffers after a sequence of training-mode calls
    buffers = [k for k, _ in ctx.ref.named_buffers()]
    if not buffers or not shared_keys:
        results.append(skipped("state_buffers", "no buffers" if not buffers else "state_dict keys differ",
                               "incorrect"))
    else:
        with preserved_state(ctx.ref, ctx.cand):
            # training-mode calls under no_grad change buffers only: their starting values are all a float64 rerun needs
            start = {k: v.detach().clone() for k, v in ctx.ref.named_buffers()}
            ctx.cand.load_state_dict(handed_state(ctx.ref.state_dict()), strict=same_keys)
            ctx.ref.train()
            ctx.cand.train()
            seeds = [ctx.seed() for _ in range(3)]
            for seed in seeds:
                inputs = ctx.make_inputs(seed)
                run(ctx.ref, clone_inputs(inputs))
                run(ctx.cand, clone_inputs(inputs))
            ref_state = dict(ctx.ref.named_buffers())
            cand_state = dict(ctx.cand.named_buffers())
            bad, far, note = [], [], ""
            for k in buffers:
                r, c = ref_state[k], cand_state.get(k)
                if c is None:
                    bad.append(f"{k} missing")
                    continue
                if r.is_floating_point():
                    if not buffers_close(c.to(r.device), r):
                        far.append(k)
                        bad.append(f"{k}: max diff {float((c.double().to(r.device) - r.double()).abs().max()):.3g}")
                elif not _equal(c.to(r.device), r):
                    bad.append(f"{k}: {c.tolist() if c.numel() == 1 else '...'} vs {r.tolist() if r.numel() == 1 else '...'}")
            if far and len(far) == len(bad):
                wide = _float64_buffers(ctx, start, seeds)
                if wide is not None and all(k in wide and buffer_as_accurate(cand_state[k].to(ref_state[k].device),
                                                                              ref_state[k], wide[k]) for k in far):
                    bad = []
                    note = (f"; {len(far)} differ from the reference's beyond the band but are as near the same calls "
                            f"made in float64 as the reference's own ({', '.join(far[:3])})")
        if bad:
            results.append(failed("state_buffers", "after 3 training-mode calls: " + "; ".join(bad[:4]), "incorrect"))
        else:
            moved = _moved_in_eval(ctx, buffers, same_keys)
            if moved is not None:
                results.append(failed("state_buffers", moved, "incorrect"))
            else:
                results.append(passed("state_buffers", f"{len(buffers)} buffer(s) match after 3 training-mode calls"
                                      + note + "; eval-mode calls leave them as the reference's do", "incorrect"))
    return results


def _moved_in_eval(ctx: VerifyContext, buffers: list[str], same_keys: bool) -> str | None:
    """Red team round 11 (adv_eval_stats_drift): where the reference's eval-mode calls leave its buffers bitwise as
    they were (running statistics are read, not updated, in eval), the candidate's must be too, bitwise — a forward
    that moves them in eval by a small momentum answers right call by call (each output is right for the
    statistics it read) while a caller who only evaluates drifts away from what was loaded. None when they stay."""
    with preserved_state(ctx.ref, ctx.cand):
        ctx.cand.load_state_dict(handed_state(ctx.ref.state_dict()), strict=same_keys)
        ctx.ref.eval()
        ctx.cand.eval()
        before = {k: v.detach().clone() for k, v in ctx.ref.named_buffers()}
        for _ in range(3):
            inputs = ctx.make_inputs(ctx.seed())
            run(ctx.ref, clone_inputs(inputs))
            run(ctx.cand, clone_inputs(inputs))
        ref_state = dict(ctx.ref.named_buffers())
        if not all(_same_bits(ref_state[k], before[k]) for k in buffers):
            return None  # the reference's own eval-mode forward moves them: judged by the training-mode calls only
        cand_state = dict(ctx.cand.named_buffers())
        moved = [k for k in buffers if k in cand_state and not _same_bits(cand_state[k].to(before[k].device), before[k])]
    if not moved:
        return None
    return (f"after 3 eval-mode calls the candidate's buffers {', '.join(moved[:4])} changed where the reference's stay "
            "bitwise as loaded (statistics updated in eval mode: a caller who only evaluates drifts from what was "
            "loaded)")


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(_equal(torch.nan_to_num(a), torch.nan_to_num(b)))
    return bool(_equal(a, b))


def _float64_buffers(ctx: VerifyContext, start: dict[str, torch.Tensor],
                     seeds: list[int]) -> dict[str, torch.Tensor] | None:
    """The reference's buffers after the same training-mode calls (the same inputs, from their seeds) made in float64
    from the same starting buffers (`start`); None where the reference cannot run in float64."""
    try:
        wide = float64_copy(ctx.ref)
        with torch.no_grad():
            for k, b in wide.named_buffers():
                if k in start:
                    b.copy_(start[k])
        wide.train()
        with torch.no_grad():
            for seed in seeds:
                wide(*widen(ctx.make_inputs(seed)))
        return {k: v.detach() for k, v in wide.named_buffers()}
    except Exception:  # noqa: BLE001 — no float64 view: the band alone decides, as before
        return None


def buffer_as_accurate(cand: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor) -> bool:
    """A floating buffer outside buffers_close's band that is still as accurate as the reference's: within
    AS_ACCURATE_MULTIPLE times the reference's own worst distance from the float64 run, plus the band, everywhere
    (compare.py's rule for outputs). A deep network in training mode computes its late layers' batch statistics
    from activations that already differ from float64 by percents, in PyTorch too."""
    if ref64.shape != ref.shape:
        return False
    z = ref64.to(ref.device, torch.float64)
    worst = float((ref.double() - z).abs().max()) if ref.numel() else 0.0
    eps = torch.finfo(ref.dtype).eps
    scale = float(ref.detach().abs().max()) if ref.numel() else 0.0
    atol, rtol = max(1e-5, 2 * eps * scale), max(1e-4, 2 * eps)
    if not math.isfinite(worst):
        return False
    return bool(((cand.double() - z).abs() <= AS_ACCURATE_MULTIPLE * worst + atol + rtol * z.abs()).all())


def buffers_close(cand: torch.Tensor, ref: torch.Tensor) -> bool:
    """A floating buffer after training-mode calls (running statistics): within 1e-4 relative, or within two units
    in the last place of the buffer's own dtype at the buffer's largest magnitude where that is coarser. A 16-bit
    running mean rounds its fp32 update once per call, and its batch means come from 16-bit activations whose
    rounding (another convolution algorithm, a bias added apart) moves a mean by steps of the activations' scale,
    not of the small mean's own: that is the dtype's resolution, not a wrong update, which moves a statistic by
    percents."""
    eps = torch.finfo(ref.dtype).eps
    scale = float(ref.detach().abs().max()) if ref.numel() else 0.0
    return torch.allclose(cand.double(), ref.double(), atol=max(1e-5, 2 * eps * scale), rtol=max(1e-4, 2 * eps))


def check_parameters(ctx: VerifyContext) -> CheckResult:
    """state_parameters: the candidate keeps the reference's parameters as parameters. A weight registered as a buffer
    under the reference's name loads, answers and checkpoints exactly as a parameter does, so no check that calls
    forward or moves state_dict sees it — but `model.parameters()` no longer holds it: an optimizer built from it
    trains nothing, `requires_grad_`, parameter counts, DDP/FSDP and weight decay skip it (red team round 12,
    adv_params_as_buffers). Structural, no call: every reference parameter whose name the candidate has must be a
    parameter there, and the candidate's parameters must hold at least as many elements as the reference's (weights
    renamed, fused or transposed keep their size; weights kept as buffers or plain tensor attributes under other
    names do not). A parameter frozen (requires_grad off) where the reference's trains is said, not failed."""
    ref_params = dict(ctx.ref.named_parameters())
    if not ref_params:
        return skipped("state_parameters", "the reference has no parameters", "incorrect")
    cand_params = dict(ctx.cand.named_parameters())
    cand_buffers = dict(ctx.cand.named_buffers())
    as_buffers = [n for n in ref_params if n in cand_buffers and n not in cand_params]
    ref_n = sum(p.numel() for p in ref_params.values())
    cand_n = sum(p.numel() for p in cand_params.values())
    problems = []
    if as_buffers:
        problems.append(f"the reference's parameter(s) {', '.join(as_buffers[:4])} are buffers in the candidate")
    if cand_n < ref_n:
        problems.append(f"the candidate's parameters hold {cand_n} element(s), the reference's {ref_n}")
    if problems:
        return failed("state_parameters", "; ".join(problems) + " — model.parameters() does not hold the weights: an "
                      "optimizer built from it trains nothing, parameter counts and requires_grad_ miss them",
                      "incorrect")
    frozen = [n for n, p in cand_params.items() if not p.requires_grad
              and (n not in ref_params or ref_params[n].requires_grad)]
    if frozen and any(p.requires_grad for p in ref_params.values()):
        return warned("state_parameters", f"parameters kept, but {', '.join(frozen[:4])} frozen (requires_grad off) "
                      "where the reference's train", "incorrect")
    return passed("state_parameters", f"{len(cand_params)} parameter(s), {cand_n} elements (the reference: "
                  f"{len(ref_params)}, {ref_n})", "incorrect")


def check_instances(ctx: VerifyContext) -> CheckResult:
    """state_instances: two more instances of the candidate, built from other seeds exactly as the checked one was
    (constructed, placed, synced from a reference built from the same seed: the same code path, so the same version
    counters, shapes, dtypes and devices — other weights), called in turn on the same inputs, each compared with its
    own reference. State shared between instances that is not keyed on which instance or which values it belongs to (a
    module-level cache of derived weights keyed on shape and version counters) answers the second instance with the
    first one's weights. Every check before uses one instance, and every instance the harness had built came from one
    seed (red team round 10, adv_shared_weight_cache). An instance per seed is kept alive throughout, so no address is
    reused between them."""
    # Compared by the pass mark, else no row far off (compare_timed's rule off the distribution): these instances have
    # no float64 copy to judge a rounding miss by, and a miss from someone else's weights is whole rows off.
    if ctx.rebuild is None:
        return skipped("state_instances", "no way to build other instances here", "incorrect")
    ref_params = sum(p.numel() * p.element_size() for p in ctx.ref.parameters())
    if ref_params == 0:
        return skipped("state_instances", "the reference has no parameters: instances cannot differ", "incorrect")
    from .budget import Budget

    inputs = ctx.make_inputs(ctx.seed())
    budget = Budget.for_problem(ctx.device, inputs, list(ctx.ref.parameters()))
    if 4 * ref_params > budget.allowance:
        return skipped("state_instances", f"two more instances of each model ({4 * ref_params / 2**20:.0f} MiB) are "
                       "beyond the check budget", "incorrect")
    try:
        pairs = [ctx.rebuild(ctx.seed()) for _ in range(2)]
    except Exception as exc:  # noqa: BLE001 — a constructor that cannot run twice (a one-off global) is said, not failed
        return warned("state_instances", f"another instance could not be built: {type(exc).__name__}: "
                      f"{str(exc)[:200]}", "incorrect")
    bad = []
    for label, order in (("first", (0, 1)), ("again", (1, 0))):
        x = ctx.make_inputs(ctx.seed())
        for k in order:
            ref, cand = pairs[k]
            why = _far_off(ctx, run(cand, clone_inputs(x)), run(ref, clone_inputs(x)))
            if why is not None:
                bad.append(f"instance {k + 2} ({label} round): {why}")
    x = ctx.make_inputs(ctx.seed())
    with preserved_state(ctx.ref, ctx.cand):
        c = judged_compare(ctx, x, run(ctx.cand, clone_inputs(x)), run(ctx.ref, clone_inputs(x)))
    if not c.ok:
        bad.append(f"the checked instance, after the others ran: {c.message}")
    del pairs
    if bad:
        return failed("state_instances", "instances of the candidate built with other weights answer with "
                      "someone else's state: " + "; ".join(bad[:3]) + " — state shared between instances (a "
                      "module-level cache not keyed on the instance or its values)", "incorrect")
    return passed("state_instances", "two more instances with other weights, called in turn, each matches its own "
                  "reference; the checked one still matches after them", "incorrect")


def _far_off(ctx: VerifyContext, out: object, ref_out: object) -> str | None:
    """Why `out` is not `ref_out` by the pass mark, with rounding excused row by row (compare.compare_timed's rule for
    pairs off the distribution: a row more than 1e-2 off in relative L2, or a stray non-finite value); None if close."""
    from ..compare import OutputStructureError, compare_timed, flatten_outputs

    try:
        outs, refs = flatten_outputs(out, "ModelNew output"), flatten_outputs(ref_out, "reference output")
    except OutputStructureError as exc:
        return str(exc)
    if len(outs) != len(refs):
        return f"{len(outs)} output tensor(s), the reference {len(refs)}"
    for k, (o, r) in enumerate(zip(outs, refs)):
        ok, why = compare_timed(k, o, r, ctx.atol, ctx.rtol, True)
        if not ok:
            return why
    return None
