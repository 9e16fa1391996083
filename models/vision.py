"""CI-sized vision models: every structural feature of the published architecture, tiny widths.

Each factory returns an `nn.Module` (in training mode; call `.eval()` before export) that maps a
float image x of shape (1, 3, H, W), H = W = IMAGE_SIZES[name], to logits of shape (1, 100).
All are random-weight: no pretrained weights are downloaded.

  vit_ci              ViT-B/16 narrowed (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words"):
                      torchvision.models.vision_transformer.VisionTransformer, image 64, patch 16
                      (16 patches + class token), 2 encoder layers, 4 heads, hidden 64, MLP 128 (GELU),
                      pre-LayerNorm, nn.MultiheadAttention, learned position embedding; the
                      zero-initialised head is re-initialised (nn.Linear default).
  swin_ci             Swin-T narrowed (Liu et al. 2021, "Swin Transformer: Hierarchical Vision
                      Transformer using Shifted Windows"): torchvision.models.swin_transformer.
                      SwinTransformer (v1 block), patch 4, embed 24, depths [2, 2], heads [2, 4],
                      window 4x4, image 64: stage resolutions 16x16 and 8x8 exceed the window, so the
                      second block of each stage uses the shifted window (torch.roll by 2) and its
                      attention mask; relative position bias; PatchMerging between the stages.
  convnext_ci         ConvNeXt-T narrowed (Liu et al. 2022, "A ConvNet for the 2020s"):
                      torchvision.models.convnext.ConvNeXt with block_setting 16 -> 32 -> 64 (1, 1, 2
                      blocks): 4x4/4 stem + LayerNorm2d, CNBlock (7x7 depthwise conv, Permute, LayerNorm,
                      Linear 4x, GELU, Linear, layer scale, stochastic depth), LayerNorm2d + 2x2/2 conv
                      downsampling; image 64.
  mobilenetv3_ci      MobileNetV3-Small narrowed (Howard et al. 2019, "Searching for MobileNetV3"):
                      torchvision.models.mobilenetv3.MobileNetV3 from _mobilenet_v3_conf(
                      "mobilenet_v3_small", width_mult=0.25), last_channel 256 instead of 1024 // 4:
                      ReLU and Hardswish, squeeze-excite with Hardsigmoid, 3x3 and 5x5 depthwise convs,
                      BatchNorm; image 96.
  efficientnet_b0_ci  EfficientNet-B0 narrowed (Tan & Le 2019, "EfficientNet: Rethinking Model Scaling
                      for Convolutional Neural Networks"): torchvision.models.efficientnet.EfficientNet
                      from _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.5):
                      MBConv with SiLU, squeeze-excite (SiLU/Sigmoid), stochastic depth (identity at
                      eval), BatchNorm; image 96.
  mobilevit_ci        MobileViT narrowed below XXS (Mehta & Rastegari 2021, "MobileViT: Light-weight,
                      General-purpose, and Mobile-friendly Vision Transformer"), written here (torchvision
                      0.14 has none): MV2 inverted residual blocks (expansion 2), MobileViT blocks (3x3 conv
                      + 1x1 conv, unfold into 2x2 patches with reshape/transpose, pre-LayerNorm transformer
                      layers with a fused qkv Linear chunked in three, SiLU FFN, final LayerNorm, fold
                      back, 1x1 conv, concat with the block input, 3x3 conv fusion), BatchNorm + SiLU;
                      image 64.

The modules compute in whatever dtype they are cast to (f32, f64, bf16).
"""

import torch
from torch import nn
from torchvision.models.convnext import CNBlockConfig, ConvNeXt
from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
from torchvision.models.mobilenetv3 import MobileNetV3, _mobilenet_v3_conf
from torchvision.models.swin_transformer import SwinTransformer
from torchvision.models.vision_transformer import VisionTransformer

NUM_CLASSES = 100

IMAGE_SIZES = {
    "vit_ci": 64,
    "swin_ci": 64,
    "convnext_ci": 64,
    "mobilenetv3_ci": 96,
    "efficientnet_b0_ci": 96,
    "mobilevit_ci": 64,
}


# ---- torchvision models, narrowed ----------------------------------------------------------

def vit_ci():
    """ViT-B/16 narrowed: 64x64 image, 16x16 patches, 2 layers, 4 heads, hidden 64, MLP 128.

    torchvision zero-initialises the classification head (its logits would be all zero), so the
    head gets nn.Linear's default init instead.

    Export note: in eval mode under torch.no_grad() (or with no parameter requiring grad),
    torch 1.13's nn.MultiheadAttention takes its fast path, aten::_native_multi_head_attention,
    which the ONNX exporter does not support; export with grad enabled.
    """
    model = VisionTransformer(
        image_size=IMAGE_SIZES["vit_ci"],
        patch_size=16,
        num_layers=2,
        num_heads=4,
        hidden_dim=64,
        mlp_dim=128,
        num_classes=NUM_CLASSES,
    )
    model.heads.head.reset_parameters()
    return model


def swin_ci():
    """Swin-T narrowed: patch 4, embed 24, depths [2, 2], heads [2, 4], window 4x4 at 64x64."""
    return SwinTransformer(
        patch_size=[4, 4],
        embed_dim=24,
        depths=[2, 2],
        num_heads=[2, 4],
        window_size=[4, 4],
        stochastic_depth_prob=0.1,
        num_classes=NUM_CLASSES,
    )


def convnext_ci():
    """ConvNeXt-T narrowed: stages 16 -> 32 -> 64 channels with 1, 1, 2 CNBlocks."""
    block_setting = [
        CNBlockConfig(16, 32, 1),
        CNBlockConfig(32, 64, 1),
        CNBlockConfig(64, None, 2),
    ]
    return ConvNeXt(block_setting, stochastic_depth_prob=0.1, num_classes=NUM_CLASSES)


def mobilenetv3_ci():
    """MobileNetV3-Small at width 0.25, last_channel 256."""
    setting, _ = _mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25)
    return MobileNetV3(setting, last_channel=256, num_classes=NUM_CLASSES)


def efficientnet_b0_ci():
    """EfficientNet-B0 at width 0.25, depth 0.5 (torchvision's B0 dropout 0.2)."""
    setting, last_channel = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.5)
    return EfficientNet(setting, dropout=0.2, stochastic_depth_prob=0.2, num_classes=NUM_CLASSES,
                        last_channel=last_channel)


# ---- MobileViT (Mehta & Rastegari 2021) ----------------------------------------------------

class ConvBNSiLU(nn.Sequential):
    """Conv2d (no bias) + BatchNorm2d (+ SiLU)."""

    def __init__(self, c1, c2, k=3, s=1, groups=1, act=True):
        layers = [nn.Conv2d(c1, c2, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(c2)]
        if act:
            layers.append(nn.SiLU())
        super().__init__(*layers)


class MV2Block(nn.Module):
    """MobileNetV2 inverted residual: 1x1 expand, 3x3 depthwise (stride s), 1x1 linear project."""

    def __init__(self, c1, c2, stride=1, expansion=2):
        super().__init__()
        hidden = c1 * expansion
        self.use_res = stride == 1 and c1 == c2
        self.block = nn.Sequential(
            ConvBNSiLU(c1, hidden, 1),
            ConvBNSiLU(hidden, hidden, 3, stride, groups=hidden),
            ConvBNSiLU(hidden, c2, 1, act=False),
        )

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_res else y


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention with one fused qkv Linear, chunked in three."""

    def __init__(self, dim, heads):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, n, self.heads, self.head_dim).transpose(1, 2)  # (b, h, n, hd)
        k = k.view(b, n, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(b, n, self.heads, self.head_dim).transpose(1, 2)
        attn = torch.matmul(q * self.scale, k.transpose(-2, -1)).softmax(dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, n, d)
        return self.proj(out)


class TransformerLayer(nn.Module):
    """Pre-LayerNorm transformer encoder layer: x + MHSA(LN(x)), x + FFN(LN(x)), SiLU FFN."""

    def __init__(self, dim, heads, ffn_dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = MultiHeadSelfAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.SiLU(), nn.Linear(ffn_dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.ffn(self.norm2(x))


class MobileViTBlock(nn.Module):
    """Local 3x3 + 1x1 conv, unfold into ph x pw patches, L transformer layers, fold, 1x1 conv,
    concat with the input, 3x3 conv fusion."""

    def __init__(self, channels, dim, depth, heads=4, ffn_mult=2, patch=(2, 2)):
        super().__init__()
        self.ph, self.pw = patch
        self.local_rep = nn.Sequential(
            ConvBNSiLU(channels, channels, 3),
            nn.Conv2d(channels, dim, 1, bias=False),  # linear projection to d, as in the paper
        )
        self.transformer = nn.Sequential(
            *[TransformerLayer(dim, heads, dim * ffn_mult) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.proj = ConvBNSiLU(dim, channels, 1)
        self.fusion = ConvBNSiLU(2 * channels, channels, 3)

    def unfold(self, x):
        # (B, d, H, W) -> (B * P, N, d), P = ph * pw pixels per patch, N = number of patches
        b, d, h, w = x.shape
        ph, pw = self.ph, self.pw
        nh, nw = h // ph, w // pw
        x = x.reshape(b * d * nh, ph, nw, pw).transpose(1, 2)  # (B d nh, nw, ph, pw)
        x = x.reshape(b, d, nh * nw, ph * pw).transpose(1, 3)  # (B, P, N, d)
        return x.reshape(b * ph * pw, nh * nw, d), (b, d, h, w)

    def fold(self, x, shape):
        b, d, h, w = shape
        ph, pw = self.ph, self.pw
        nh, nw = h // ph, w // pw
        x = x.reshape(b, ph * pw, nh * nw, d).transpose(1, 3)  # (B, d, N, P)
        x = x.reshape(b * d * nh, nw, ph, pw).transpose(1, 2)  # (B d nh, ph, nw, pw)
        return x.reshape(b, d, h, w)

    def forward(self, x):
        y = self.local_rep(x)
        patches, shape = self.unfold(y)
        patches = self.norm(self.transformer(patches))
        y = self.proj(self.fold(patches, shape))
        return self.fusion(torch.cat([x, y], dim=1))


class MobileViT(nn.Module):
    """MobileViT: 3x3/2 stem, MV2 stages, three MobileViT blocks at strides 8, 16, 32, 1x1 conv,
    global average pool, Linear."""

    def __init__(self, channels, dims, depths, last_channel, num_classes, expansion=2, heads=4):
        super().__init__()
        c = channels
        self.stem = ConvBNSiLU(3, c[0], 3, 2)
        self.layer1 = MV2Block(c[0], c[1], 1, expansion)
        self.layer2 = nn.Sequential(
            MV2Block(c[1], c[2], 2, expansion),
            MV2Block(c[2], c[2], 1, expansion),
            MV2Block(c[2], c[2], 1, expansion),
        )
        self.layer3 = nn.Sequential(
            MV2Block(c[2], c[3], 2, expansion),
            MobileViTBlock(c[3], dims[0], depths[0], heads))
        self.layer4 = nn.Sequential(
            MV2Block(c[3], c[4], 2, expansion),
            MobileViTBlock(c[4], dims[1], depths[1], heads))
        self.layer5 = nn.Sequential(
            MV2Block(c[4], c[5], 2, expansion),
            MobileViTBlock(c[5], dims[2], depths[2], heads))
        self.conv_1x1_exp = ConvBNSiLU(c[5], last_channel, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(last_channel, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = self.layer5(x)
        x = self.conv_1x1_exp(x)
        return self.classifier(torch.flatten(self.pool(x), 1))


def mobilevit_ci():
    """MobileViT below XXS (XXS: channels 16,16,24,48,64,80, d 64,80,96, L 2,4,3, 320 last):
    channels 8,8,16,24,32,32, d 32,40,48, L 2,2,1, 4 heads, FFN 2d, last 128, 64x64 (the
    MobileViT blocks see 8x8, 4x4 and 2x2 maps, in 2x2 patches)."""
    return MobileViT(channels=[8, 8, 16, 24, 32, 32], dims=[32, 40, 48], depths=[2, 2, 1],
                     last_channel=128, num_classes=NUM_CLASSES)


FACTORIES = {
    "vit_ci": vit_ci,
    "swin_ci": swin_ci,
    "convnext_ci": convnext_ci,
    "mobilenetv3_ci": mobilenetv3_ci,
    "efficientnet_b0_ci": efficientnet_b0_ci,
    "mobilevit_ci": mobilevit_ci,
}
