"""A pre-norm causal transformer block in bf16: LayerNorm, SDPA attention, LayerNorm, GELU MLP, residuals.

8 x 1024 tokens, hidden 1024, 16 heads of 64, MLP 4096; weights are created in bf16 and the input is
bf16, so every op runs in half precision (about 240 GFLOP per call).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, hidden, num_heads, mlp_hidden):
        super().__init__()
        half = {"dtype": torch.bfloat16}
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(hidden, **half)
        self.qkv = nn.Linear(hidden, 3 * hidden, **half)
        self.proj = nn.Linear(hidden, hidden, **half)
        self.ln2 = nn.LayerNorm(hidden, **half)
        self.fc1 = nn.Linear(hidden, mlp_hidden, **half)
        self.fc2 = nn.Linear(mlp_hidden, hidden, **half)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.num_heads, C // self.num_heads).transpose(1, 2)
        k = k.view(B, T, self.num_heads, C // self.num_heads).transpose(1, 2)
        v = v.view(B, T, self.num_heads, C // self.num_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


batch_size = 8
tokens = 1024
hidden = 1024
num_heads = 16
mlp_hidden = 4096


def get_inputs():
    return [torch.randn(batch_size, tokens, hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return [hidden, num_heads, mlp_hidden]
