import torch, torch.nn.functional as F, sys
sys.path.insert(0, "python")
from kforge_worker.off_distribution import rows_apart
from kforge_worker.compare import far_rows, far_rows_are_rounding, input_row_scales
torch.manual_seed(0)
B, K, H = 64, 512, 512
W1 = torch.randn(K, H) / K**0.5; W2 = torch.randn(K, H) / K**0.5
def f(x, W1, W2): return F.silu(x @ W1) * (x @ W2)
def lin(x, W1, W2): return x @ W1
for name, fn in [("swiglu", f), ("linear", lin)]:
    x = rows_apart([torch.randn(B, K)], 7, torch.device("cpu"))[0]
    ref = fn(x, W1, W2); ref64 = fn(x.double(), W1.double(), W2.double())
    n = ref64.norm(dim=1)
    scales = x.norm(dim=1) / K**0.5
    for factor, label in [(0.0, "zeros"), (0.95, "5% low"), (0.5, "half")]:
        cand = ref.clone()
        small = (scales > 0) & (scales < 0.05)
        cand[small] *= factor
        far = far_rows(cand, ref, 1e-4)
        ok = (far_rows_are_rounding(cand, ref, ref64, far), far_rows_are_rounding(cand, ref, ref64, far, None, input_row_scales([x], x.shape[0]))) if far else None
        print(name, label, "wrong rows", int(small.sum()), "far", len(far), "forgiven", ok)
print("--- bf16/fp16, unnormalised weights")
for dt in (torch.bfloat16, torch.float16):
    W = torch.randn(K, H).to(dt)
    x = rows_apart([torch.randn(B, K).to(dt)], 7, torch.device("cpu"))[0]
    ref = (x @ W); ref64 = x.double() @ W.double()
    scales = x.float().norm(dim=1) / K**0.5
    for factor, label in [(0.0, "zeros"), (0.5, "half"), (0.8, "20% low")]:
        for lim in (0.015, 0.05, 0.2):
            cand = ref.clone()
            small = (scales > 0) & (scales < lim)
            cand[small] = (cand[small].float() * factor).to(dt)
            far = far_rows(cand, ref, 1e-2)
            ok = (far_rows_are_rounding(cand, ref, ref64, far), far_rows_are_rounding(cand, ref, ref64, far, None, input_row_scales([x], x.shape[0]))) if far else None
            print(dt, label, "rows below", lim, int(small.sum()), "far", len(far), "forgiven", ok)
