"""The real models of issue 6, written out from their published architectures.

  YOLOv8      Ultralytics YOLOv8 (ultralytics/cfg/models/v8/yolov8.yaml, nn/modules/{conv,block,head}.py)
              at scale n (depth 0.33, width 0.25, max channels 1024), 80 classes; outputs boxes (xywh,
              pixels) and class scores as two tensors instead of Ultralytics' one (1, 84, A).
  MobileNetV2 torchvision.models.mobilenet_v2 (Sandler et al. 2018), 1000 classes.
  GatedChain  N steps of h = h + tanh(a) * sigmoid(b), a, b = chunk(Conv1d(64, 128, 1)(h), 2, dim=1).
  WaveNet     8 gated causal dilated conv layers (dilations 1..128) with residual and skip 1x1 convs.

Every module that chunks takes `lowering` ("shape": Tensor.chunk, "split": torch.unsafe_chunk; see
generate.py). The modules compute with whatever dtype they are cast to (f32, f64, bf16).
"""

import math

import torch
from torch import nn
from torch.nn import functional as F


def chunk(t, chunks, dim, lowering):
    """`t.chunk(chunks, dim)`, written so the exporter emits the requested lowering."""
    if lowering == "shape":
        return t.chunk(chunks, dim)
    if lowering == "split":
        return torch.unsafe_chunk(t, chunks, dim)
    raise ValueError(lowering)


# ---- YOLOv8 --------------------------------------------------------------------------------

def make_divisible(x, divisor):
    return math.ceil(x / divisor) * divisor


class Conv(nn.Module):
    """Ultralytics Conv: Conv2d(k, s, autopad k // 2, no bias) + BatchNorm2d + SiLU."""

    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True, k=(3, 3), e=1.0):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, k[0])
        self.cv2 = Conv(c_, c2, k[1])
        self.add = shortcut and c1 == c2

    def forward(self, x):
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class C2f(nn.Module):
    def __init__(self, lowering, c1, c2, n=1, shortcut=False, e=0.5):
        super().__init__()
        self.lowering = lowering
        self.c = int(c2 * e)
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, self.c, shortcut, k=(3, 3), e=1.0) for _ in range(n))

    def forward(self, x):
        y = list(chunk(self.cv1(x), 2, 1, self.lowering))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1)
        self.cv2 = Conv(c_ * 4, c2, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x):
        y = [self.cv1(x)]
        y.extend(self.m(y[-1]) for _ in range(3))
        return self.cv2(torch.cat(y, 1))


class DFL(nn.Module):
    """Distribution focal loss integral: softmax over reg_max bins, then a fixed 1x1 conv with
    weights arange(reg_max), i.e. the expected bin."""

    def __init__(self, c1=16):
        super().__init__()
        self.conv = nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
        with torch.no_grad():
            self.conv.weight.copy_(torch.arange(c1, dtype=torch.float).view(1, c1, 1, 1))
        self.c1 = c1

    def forward(self, x):
        b, _, a = x.shape  # batch, channels, anchors
        return self.conv(x.view(b, 4, self.c1, a).transpose(2, 1).softmax(1)).view(b, 4, a)


def make_anchors(feats, strides, grid_cell_offset=0.5):
    """Ultralytics make_anchors: grid cell centres (x + 0.5, y + 0.5) of every level, row-major, and
    each one's stride, computed from the feature maps' shapes as Ultralytics does during export."""
    anchor_points, stride_tensor = [], []
    dtype, device = feats[0].dtype, feats[0].device
    for i, stride in enumerate(strides):
        _, _, h, w = feats[i].shape
        sx = torch.arange(end=w, dtype=dtype, device=device) + grid_cell_offset
        sy = torch.arange(end=h, dtype=dtype, device=device) + grid_cell_offset
        sy, sx = torch.meshgrid(sy, sx, indexing="ij")
        anchor_points.append(torch.stack((sx, sy), -1).view(-1, 2))
        stride_tensor.append(torch.full((h * w, 1), stride, dtype=dtype, device=device))
    return torch.cat(anchor_points), torch.cat(stride_tensor)


def dist2bbox(distance, anchor_points, lowering, dim=1):
    """(left-top, right-bottom) distances to xywh boxes."""
    lt, rb = chunk(distance, 2, dim, lowering)
    x1y1 = anchor_points - lt
    x2y2 = anchor_points + rb
    return torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), dim)


class Detect(nn.Module):
    def __init__(self, lowering, nc, ch, strides=(8.0, 16.0, 32.0)):
        super().__init__()
        self.lowering = lowering
        self.nc = nc
        self.reg_max = 16
        self.no = nc + self.reg_max * 4
        self.stride = strides
        c2 = max(16, ch[0] // 4, self.reg_max * 4)
        c3 = max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(
            nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * self.reg_max, 1)) for x in ch)
        self.cv3 = nn.ModuleList(
            nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for x in ch)
        self.dfl = DFL(self.reg_max)

    def forward(self, x):
        x = [torch.cat((self.cv2[i](xi), self.cv3[i](xi)), 1) for i, xi in enumerate(x)]
        shape = x[0].shape
        x_cat = torch.cat([xi.view(shape[0], self.no, -1) for xi in x], 2)
        anchors, strides = (t.transpose(0, 1) for t in make_anchors(x, self.stride, 0.5))
        box, cls = x_cat.split((self.reg_max * 4, self.nc), 1)
        dbox = dist2bbox(self.dfl(box), anchors.unsqueeze(0), self.lowering, dim=1) * strides
        return dbox, cls.sigmoid()


class YOLOv8(nn.Module):
    """yolov8.yaml at a scale (depth, width, max_channels); n = (0.33, 0.25, 1024)."""

    def __init__(self, lowering, nc=80, depth=0.33, width=0.25, max_channels=1024):
        super().__init__()

        def c(ch):
            return make_divisible(min(ch, max_channels) * width, 8)

        def n(k):
            return max(round(k * depth), 1) if k > 1 else k

        L = lowering
        # backbone
        self.b0 = Conv(3, c(64), 3, 2)                          # P1/2
        self.b1 = Conv(c(64), c(128), 3, 2)                     # P2/4
        self.b2 = C2f(L, c(128), c(128), n(3), True)
        self.b3 = Conv(c(128), c(256), 3, 2)                    # P3/8
        self.b4 = C2f(L, c(256), c(256), n(6), True)
        self.b5 = Conv(c(256), c(512), 3, 2)                    # P4/16
        self.b6 = C2f(L, c(512), c(512), n(6), True)
        self.b7 = Conv(c(512), c(1024), 3, 2)                   # P5/32
        self.b8 = C2f(L, c(1024), c(1024), n(3), True)
        self.b9 = SPPF(c(1024), c(1024), 5)
        # head
        self.up = nn.Upsample(None, 2, "nearest")
        self.h12 = C2f(L, c(1024) + c(512), c(512), n(3))
        self.h15 = C2f(L, c(512) + c(256), c(256), n(3))        # P3 out
        self.h16 = Conv(c(256), c(256), 3, 2)
        self.h18 = C2f(L, c(256) + c(512), c(512), n(3))        # P4 out
        self.h19 = Conv(c(512), c(512), 3, 2)
        self.h21 = C2f(L, c(512) + c(1024), c(1024), n(3))      # P5 out
        self.detect = Detect(L, nc, (c(256), c(512), c(1024)))

    def forward(self, x):
        x = self.b2(self.b1(self.b0(x)))
        p3 = self.b4(self.b3(x))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        h12 = self.h12(torch.cat([self.up(p5), p4], 1))
        h15 = self.h15(torch.cat([self.up(h12), p3], 1))
        h18 = self.h18(torch.cat([self.h16(h15), h12], 1))
        h21 = self.h21(torch.cat([self.h19(h18), p5], 1))
        return self.detect([h15, h18, h21])


# ---- MobileNetV2 ---------------------------------------------------------------------------

def _make_divisible(v, divisor=8, min_value=None):
    """torchvision's rounding of channel counts."""
    min_value = divisor if min_value is None else min_value
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNReLU6(nn.Sequential):
    """torchvision Conv2dNormActivation(norm_layer=BatchNorm2d, activation_layer=ReLU6)."""

    def __init__(self, c1, c2, k=3, s=1, groups=1):
        super().__init__(nn.Conv2d(c1, c2, k, s, (k - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(c2), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = [ConvBNReLU6(inp, hidden, k=1)] if expand_ratio != 1 else []
        layers += [ConvBNReLU6(hidden, hidden, s=stride, groups=hidden),   # depthwise
                   nn.Conv2d(hidden, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup)]  # linear
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    SETTING = [  # t (expansion), c (channels), n (repeats), s (first stride)
        [1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
        [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]

    def __init__(self, width_mult=1.0, num_classes=1000):
        super().__init__()
        inp = _make_divisible(32 * width_mult)
        self.last_channel = _make_divisible(1280 * max(1.0, width_mult))
        features = [ConvBNReLU6(3, inp, s=2)]
        for t, c, n, s in self.SETTING:
            oup = _make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(inp, oup, s if i == 0 else 1, t))
                inp = oup
        features.append(ConvBNReLU6(inp, self.last_channel, k=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last_channel, num_classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


# ---- gated 1-D models ----------------------------------------------------------------------

class GatedChain(nn.Module):
    def __init__(self, lowering, n, c=64):
        super().__init__()
        self.lowering = lowering
        self.convs = nn.ModuleList(nn.Conv1d(c, 2 * c, 1) for _ in range(n))

    def forward(self, h):
        for conv in self.convs:
            a, b = chunk(conv(h), 2, 1, self.lowering)
            h = h + torch.tanh(a) * torch.sigmoid(b)
        return h


class WaveNetLayer(nn.Module):
    def __init__(self, lowering, c, dilation):
        super().__init__()
        self.lowering = lowering
        # padding = dilation on both sides; dropping the last `dilation` outputs (a Slice, as TCN's
        # Chomp1d) leaves the T causal ones
        self.chomp = dilation
        self.dilated = nn.Conv1d(c, 2 * c, 2, dilation=dilation, padding=dilation)
        self.res = nn.Conv1d(c, c, 1)
        self.skip = nn.Conv1d(c, c, 1)

    def forward(self, x):
        z = self.dilated(x)[:, :, :-self.chomp]
        a, b = chunk(z, 2, 1, self.lowering)
        g = torch.tanh(a) * torch.sigmoid(b)
        return x + self.res(g), self.skip(g)


class WaveNet(nn.Module):
    def __init__(self, lowering, layers=8, c=32):
        super().__init__()
        self.layers = nn.ModuleList(WaveNetLayer(lowering, c, 2 ** i) for i in range(layers))
        self.head1 = nn.Conv1d(c, c, 1)
        self.head2 = nn.Conv1d(c, c, 1)

    def forward(self, x):
        skips = None
        for layer in self.layers:
            x, s = layer(x)
            skips = s if skips is None else skips + s
        return self.head2(torch.relu(self.head1(torch.relu(skips))))
