import torch
import torch.nn as nn

N, C, H, W = 16, 64, 56, 56            # batch, input channels, height, width
K, R, STRIDE, PAD = 128, 3, 1, 1       # output channels, square kernel size, stride, padding


class Model(nn.Module):
    """Standard 2-D convolution: square kernel, no bias (NCHW, float32)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return [C, K, R, STRIDE, PAD]
