"""The transformer models of issue 11, written from their papers, CI-sized (width 64, 4 heads,
2 layers, vocabulary 256) and written the way the libraries people export from write them:
one fused QKV projection chunked or split in three, heads by `view` + `transpose`, masks
filled with -inf (boolean) or the dtype's lowest value (additive), `reshape` to merge heads.

  BertEncoder     BERT (Devlin et al. 2018): token + position + segment embeddings, post-LN
                  blocks, an additive padding mask from `attention_mask` (HF's
                  `(1 - mask) * finfo.min`), erf GELU FFN, tanh pooler; outputs the last hidden
                  state and the pooled vector.
  Gpt2Decoder     GPT-2 (Radford et al. 2019): pre-LN blocks, the fused c_attn projection
                  split(d, dim=2), a causal boolean buffer sliced and masked_fill'ed with -inf,
                  tanh-approximated GELU, final LN, logits through the tied token embedding.
  LlamaDecoder    Llama (Touvron et al. 2023): RMSNorm (Zhang & Sennrich 2019), rotary position
                  embeddings (Su et al. 2021, rotate_half), grouped-query attention (8 query heads,
                  2 key/value heads, repeat_kv by expand + reshape), a SwiGLU FFN (Shazeer 2020),
                  an additive causal mask built with triu.
  T5Encoder       T5 (Raffel et al. 2020): RMS-style T5LayerNorm, unscaled attention with a
                  learned bidirectional relative position bias (32 log-spaced buckets, shared by
                  the layers), ReLU FFN, no biases.
  WhisperEncoder  Whisper's audio encoder (Radford et al. 2022): two Conv1d + GELU (the second
                  with stride 2), sinusoidal positions, pre-LN blocks whose q and k are each
                  scaled by dh^-0.25 (k without bias), final LN.
  KvCacheDecoder  the GPT-2 decoder run one step with a KV cache: past key/value per layer are
                  inputs, present key/value (past concatenated with the new) are outputs.

Every module computes in the dtype it is cast to (f32, f64, bf16).
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

VOCAB, WIDTH, HEADS, LAYERS, SEQ = 256, 64, 4, 2, 16


def split_heads(t, heads):
    b, s, _ = t.shape
    return t.view(b, s, heads, -1).transpose(1, 2)


def merge_heads(t):
    b, h, s, dh = t.shape
    return t.transpose(1, 2).reshape(b, s, h * dh)


class FusedAttention(nn.Module):
    """Self-attention with one QKV Linear. `split` chooses how the exporter sees the three-way
    split: "chunk" (Tensor.chunk: Shape/Gather/Slice in torch 1.13) or "split" (one Split)."""

    def __init__(self, d, heads, bias=True, split="chunk"):
        super().__init__()
        self.heads, self.split = heads, split
        self.qkv = nn.Linear(d, 3 * d, bias=bias)
        self.out = nn.Linear(d, d, bias=bias)

    def project(self, x):
        qkv = self.qkv(x)
        if self.split == "chunk":
            q, k, v = qkv.chunk(3, dim=-1)
        else:
            q, k, v = qkv.split(qkv.shape[-1] // 3, dim=2)
        return split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)

    def attend(self, q, k, v, additive=None, keep=None):
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if additive is not None:
            scores = scores + additive
        if keep is not None:
            scores = scores.masked_fill(~keep, float("-inf"))
        return self.out(merge_heads(torch.matmul(scores.softmax(dim=-1), v)))


class BertLayer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.attn = FusedAttention(d, heads, split="chunk")
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, additive):
        x = self.ln1(x + self.attn.attend(*self.attn.project(x), additive=additive))
        return self.ln2(x + self.down(F.gelu(self.up(x))))


class BertEncoder(nn.Module):
    inputs = ("input_ids", "attention_mask")
    outputs = ("last_hidden_state", "pooled")

    def __init__(self, d=WIDTH, heads=HEADS, layers=LAYERS, vocab=VOCAB, max_positions=64):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, d), nn.Embedding(max_positions, d)
        self.segments = nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(d, heads) for _ in range(layers))
        self.pool = nn.Linear(d, d)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        positions = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.tokens(input_ids) + self.positions(positions) + self.segments(torch.zeros_like(input_ids))
        x = self.ln(x)
        additive = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, additive)
        return x, torch.tanh(self.pool(x[:, 0]))


class Gpt2Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = FusedAttention(d, heads, split="split")
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, keep, past=None):
        q, k, v = self.attn.project(self.ln1(x))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        x = x + self.attn.attend(q, k, v, keep=keep)
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh")), (k, v)


class Gpt2Decoder(nn.Module):
    inputs = ("input_ids",)
    outputs = ("logits",)

    def __init__(self, d=WIDTH, heads=HEADS, layers=LAYERS, vocab=VOCAB, max_positions=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_positions, d)
        self.blocks = nn.ModuleList(Gpt2Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        causal = torch.tril(torch.ones(max_positions, max_positions, dtype=torch.bool))
        self.register_buffer("causal", causal.view(1, 1, max_positions, max_positions), persistent=False)

    def run(self, input_ids, pasts):
        s = input_ids.shape[1]
        start = 0 if pasts is None else pasts[0][0].shape[2]
        x = self.wte(input_ids) + self.wpe(torch.arange(start, start + s, device=input_ids.device).unsqueeze(0))
        keep = self.causal[:, :, start:start + s, :start + s]
        presents = []
        for i, block in enumerate(self.blocks):
            x, present = block(x, keep, None if pasts is None else pasts[i])
            presents.append(present)
        return torch.matmul(self.ln_f(x), self.wte.weight.t()), presents

    def forward(self, input_ids):
        return self.run(input_ids, None)[0]


class KvCacheDecoder(Gpt2Decoder):
    inputs = ("input_ids",) + tuple("past_%s_%d" % (kv, i) for i in range(LAYERS) for kv in ("key", "value"))
    outputs = ("logits",) + tuple("present_%s_%d" % (kv, i) for i in range(LAYERS) for kv in ("key", "value"))
    past_length, new_tokens = 8, 4

    def forward(self, input_ids, *past):
        pasts = [(past[2 * i], past[2 * i + 1]) for i in range(len(self.blocks))]
        logits, presents = self.run(input_ids, pasts)
        return (logits,) + tuple(t for kv in presents for t in kv)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, kv_heads, hidden):
        super().__init__()
        self.heads, self.kv_heads, self.dh = heads, kv_heads, d // heads
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.qkv = nn.Linear(d, (heads + 2 * kv_heads) * self.dh, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate, self.up = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def repeat_kv(self, t):
        b, h, s, dh = t.shape
        rep = self.heads // self.kv_heads
        return t[:, :, None, :, :].expand(b, h, rep, s, dh).reshape(b, h * rep, s, dh)

    def forward(self, x, cos, sin, additive):
        q, k, v = self.qkv(self.norm1(x)).split(
            [self.heads * self.dh, self.kv_heads * self.dh, self.kv_heads * self.dh], dim=-1)
        q, k, v = split_heads(q, self.heads), split_heads(k, self.kv_heads), split_heads(v, self.kv_heads)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.dh) + additive
        probs = F.softmax(scores.float(), dim=-1).to(q.dtype)
        x = x + self.o(merge_heads(torch.matmul(probs, v)))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LlamaDecoder(nn.Module):
    inputs = ("input_ids",)
    outputs = ("logits",)

    def __init__(self, d=WIDTH, heads=8, kv_heads=2, layers=LAYERS, vocab=VOCAB, hidden=176, max_positions=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(LlamaBlock(d, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        dh = d // heads
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh))
        angles = torch.outer(torch.arange(max_positions).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        x = self.embed(input_ids)
        cos, sin = self.cos[:s].to(x.dtype), self.sin[:s].to(x.dtype)
        additive = torch.full((s, s), float("-inf"), device=x.device).triu(1).to(x.dtype)
        for block in self.blocks:
            x = block(x, cos, sin, additive)
        return self.lm_head(self.norm(x))


class T5LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

    def forward(self, x):
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps)).to(x.dtype)


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    """T5's bidirectional buckets: half for each direction, exact below num_buckets/4, then
    logarithmic up to max_distance."""
    num_buckets //= 2
    buckets = (relative_position > 0).to(torch.long) * num_buckets
    n = torch.abs(relative_position)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, n, large)


class T5Layer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = T5LayerNorm(d), T5LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.wi, self.wo = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    def forward(self, x, bias):
        q, k, v = (split_heads(t, self.heads) for t in self.qkv(self.ln1(x)).chunk(3, dim=-1))
        scores = torch.matmul(q, k.transpose(3, 2)) + bias  # T5 does not scale the scores
        x = x + self.o(merge_heads(torch.matmul(F.softmax(scores.float(), dim=-1).type_as(scores), v)))
        return x + self.wo(F.relu(self.wi(self.ln2(x))))


class T5Encoder(nn.Module):
    inputs = ("input_ids",)
    outputs = ("last_hidden_state",)

    def __init__(self, d=WIDTH, heads=HEADS, layers=LAYERS, vocab=VOCAB, num_buckets=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.relative_bias = nn.Embedding(num_buckets, heads)
        self.layers = nn.ModuleList(T5Layer(d, heads) for _ in range(layers))
        self.final_norm = T5LayerNorm(d)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        context = torch.arange(s)[:, None]
        memory = torch.arange(s)[None, :]
        buckets = relative_position_bucket(memory - context)
        x = self.embed(input_ids)
        bias = self.relative_bias(buckets).permute(2, 0, 1).unsqueeze(0).to(x.dtype)
        for layer in self.layers:
            x = layer(x, bias)
        return self.final_norm(x)


def sinusoids(length, channels, max_timescale=10000):
    increment = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-increment * torch.arange(channels // 2))
    scaled = torch.arange(length)[:, None] * inv[None, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=1)


class WhisperBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.attn_ln, self.mlp_ln = nn.LayerNorm(d), nn.LayerNorm(d)
        self.query, self.key = nn.Linear(d, d), nn.Linear(d, d, bias=False)
        self.value, self.out = nn.Linear(d, d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.attn_ln(x)
        scale = (x.shape[-1] // self.heads) ** -0.25
        q = split_heads(self.query(h), self.heads) * scale
        k = split_heads(self.key(h), self.heads).transpose(-1, -2) * scale
        v = split_heads(self.value(h), self.heads)
        x = x + self.out(merge_heads(torch.matmul(torch.softmax(q @ k, dim=-1), v)))
        return x + self.down(F.gelu(self.up(self.mlp_ln(x))))


class WhisperEncoder(nn.Module):
    inputs = ("x",)
    outputs = ("y",)
    n_mels, frames = 16, 64

    def __init__(self, d=WIDTH, heads=HEADS, layers=LAYERS):
        super().__init__()
        self.conv1 = nn.Conv1d(self.n_mels, d, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d, d, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positions", sinusoids(self.frames // 2, d), persistent=False)
        self.blocks = nn.ModuleList(WhisperBlock(d, heads) for _ in range(layers))
        self.ln_post = nn.LayerNorm(d)

    def forward(self, x):
        x = F.gelu(self.conv2(F.gelu(self.conv1(x)))).permute(0, 2, 1)
        x = x + self.positions.to(x.dtype)
        for block in self.blocks:
            x = block(x)
        return self.ln_post(x)


def example_inputs(module, seed, seq=SEQ, vocab=VOCAB, batch=1):
    """Seeded inputs for `module`'s forward, by its `inputs` names: token ids uniform over the
    vocabulary, a padding mask with the last 3 positions off, f32 normal for everything else;
    `batch` rows each (bench/gpu-peers.py times batch 32)."""
    gen = torch.Generator().manual_seed(seed)
    past_shape = (batch, HEADS, KvCacheDecoder.past_length, WIDTH // HEADS)
    tokens = KvCacheDecoder.new_tokens if isinstance(module, KvCacheDecoder) else seq
    values = []
    for name in module.inputs:
        if name == "input_ids":
            values.append(torch.randint(0, vocab, (batch, tokens), generator=gen))
        elif name == "attention_mask":
            mask = torch.ones(batch, tokens, dtype=torch.long)
            mask[:, -3:] = 0
            values.append(mask)
        elif name.startswith("past_"):
            values.append(torch.randn(*past_shape, generator=gen))
        else:
            values.append(torch.randn(batch, WhisperEncoder.n_mels, WhisperEncoder.frames, generator=gen))
    return tuple(values)


# Benchmark sizes (bench/cpu-peers; exported by `zoo.py --bench`, not committed): the
# BERT-mini shape (Turc et al. 2019: 4 layers, width 256, 4 heads) at sequence 128, for each
# of the three decoder/encoder families; Llama keeps 8 query and 2 key/value heads.
BENCH_SEQ, BENCH_VOCAB = 128, 1024
BENCH_SIZES = {
    "BertEncoder": dict(d=256, heads=4, layers=4, vocab=BENCH_VOCAB, max_positions=BENCH_SEQ),
    "Gpt2Decoder": dict(d=256, heads=4, layers=4, vocab=BENCH_VOCAB, max_positions=BENCH_SEQ),
    "LlamaDecoder": dict(d=256, heads=8, kv_heads=2, layers=4, vocab=BENCH_VOCAB, hidden=688,
                         max_positions=BENCH_SEQ),
}

MODELS = {
    "BertEncoder": BertEncoder,
    "Gpt2Decoder": Gpt2Decoder,
    "LlamaDecoder": LlamaDecoder,
    "T5Encoder": T5Encoder,
    "WhisperEncoder": WhisperEncoder,
    "KvCacheDecoder": KvCacheDecoder,
}
