"""Real FFT along rows (torch.fft.rfft), magnitude, log1p: a spectrogram-style feature.

4096 x 16000 fp32 signals (one second at 16 kHz each) to 4096 x 8001 log-magnitudes. The FFT is an op no
fused recipe covers; abs and log1p on its complex output are the only fusable part.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        spectrum = torch.fft.rfft(x, dim=-1)
        return torch.log1p(spectrum.abs())


num_signals = 4096
signal_length = 16000


def get_inputs():
    return [torch.randn(num_signals, signal_length)]


def get_init_inputs():
    return []
