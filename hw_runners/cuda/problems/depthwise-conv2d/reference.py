import torch
import torch.nn as nn

N, C, H, W = 16, 256, 112, 112         # batch, channels (in = out), height, width
R, STRIDE, PAD = 3, 1, 1               # square kernel size, stride, padding


class Model(nn.Module):
    """Depthwise 2-D convolution (groups = channels): each channel convolved with its own R x R filter, no bias."""

    def __init__(self, in_channels: int, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, in_channels, kernel_size, stride=stride, padding=padding,
                                groups=in_channels, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return [C, R, STRIDE, PAD]
