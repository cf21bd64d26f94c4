"""Small models for memplan's tests and benchmarks, named on the command
line as `models:FACTORY` (e.g. `memplan export models:gpt_small --batch 4`).

A model may define example_input(batch) -> input tensor; memplan.torch then
uses it instead of --input-shape.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CNNSmall(nn.Module):
    """conv-bn-relu-pool x2 + linear, 3x32x32 -> 10 classes. ReLU is in place."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu1 = nn.ReLU(inplace=True)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.relu2 = nn.ReLU(inplace=True)
        self.pool2 = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x):
        x = self.pool1(self.relu1(self.bn1(self.conv1(x))))
        x = self.pool2(self.relu2(self.bn2(self.conv2(x))))
        return self.fc(torch.flatten(x, 1))

    def example_input(self, batch):
        return torch.randn(batch, 3, 32, 32)


class ResCNN(nn.Module):
    """A small residual CNN with eager in-place ops where they bite: the block
    output `out += identity` and ReLU(inplace=True) after it, 3x32x32 -> 10."""

    def __init__(self, width=32, blocks=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(*[Block(width) for _ in range(blocks)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    def example_input(self, batch):
        return torch.randn(batch, 3, 32, 32)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out)


class MLP(nn.Module):
    """64 -> 128 -> 128 (+ residual) -> 10. The residual makes `h` feed two
    ops, so the backward has to sum two gradient contributions for it."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        h = F.relu(self.fc2(h) + h)
        return self.fc3(h)

    def example_input(self, batch):
        return torch.randn(batch, 64)


class Attention(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = self.drop(F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.drop(self.c_proj(y))


class GPTBlock(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, dropout)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d),
                                 nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT-style decoder: token + position embeddings, pre-LN blocks with causal
    attention (explicit matmul/softmax: torch 1.13 has no fused attention on
    CPU), GELU MLP, dropout, untied LM head. Input: token ids (batch, seq)."""

    def __init__(self, vocab=512, seq=64, d=128, heads=4, layers=2, dropout=0.1):
        super().__init__()
        self.vocab, self.seq = vocab, seq
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList([GPTBlock(d, heads, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    def example_input(self, batch, seq=None):
        """Token ids (batch, seq); seq at most the model's (default: it)."""
        return torch.randint(0, self.vocab, (batch, seq or self.seq))


class InplaceShift(nn.Module):
    """A wide linear layer whose output is shifted in place twice (`h += 1`)
    before a sum: nothing of it is saved for the backward, so eager's peak is
    one wide buffer in the forward, where a functionalized (compiled) graph
    holds two. 64 -> 8192 -> sum over 64 groups -> 10. (Not mean: eager 1.13
    saves mean's input for its backward, the traced formula does not.)"""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 8192)
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        h = self.fc(x)
        h += 1.0
        h += 1.0
        return self.head(h.view(x.shape[0], 64, 128).sum(1))

    def example_input(self, batch):
        return torch.randn(batch, 64)


class ActCNN(nn.Module):
    """conv-bn-activation blocks whose in-place activation's backward reads the
    input it overwrites (ReLU6 = hardtanh_, Hardswish, SiLU: MobileNet's and
    EfficientNet's blocks): eager autograd saves a clone of that input when
    the activation runs. 3x64x64 -> 10, 16 channels, the blocks cycle through
    ReLU6, Hardswish and SiLU."""

    def __init__(self, width=16, blocks=6):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        acts = [nn.ReLU6, nn.Hardswish, nn.SiLU]
        self.blocks = nn.Sequential(*[
            nn.Sequential(nn.Conv2d(width, width, 3, padding=1, bias=False),
                          nn.BatchNorm2d(width), acts[k % 3](inplace=True))
            for k in range(blocks)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))

    def example_input(self, batch):
        return torch.randn(batch, 3, 64, 64)


class Gate(nn.Module):
    """Applies ReLU only when some value is positive: a branch on data."""

    def forward(self, h):
        return h.relu() if bool((h > 0).any()) else h


class DataDependent(nn.Module):
    """A model whose forward branches on a tensor's value (the exporter reads
    it from the real tensors on the CPU; on meta it cannot)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.gate, self.fc2 = nn.Linear(32, 64), Gate(), nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(self.gate(self.fc1(x)))

    def example_input(self, batch):
        return torch.randn(batch, 32)


def data_dependent():
    return DataDependent()


class PlainTensorIndex(nn.Module):
    """A model that indexes with a tensor that is neither a parameter nor a
    buffer: a plain attribute (the exporter registers it as a buffer), or,
    listed, one held in a list (on the CPU the trace takes it as a constant;
    on meta it has no data to stand in for, as in Falcon's attention)."""

    def __init__(self, listed=False):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 64), nn.Linear(64, 10)
        order = torch.arange(63, -1, -1)
        self.listed = listed
        if listed:
            self.orders = [order]
        else:
            self.order = order

    def forward(self, x):
        return self.fc2(self.fc1(x)[:, self.orders[0] if self.listed else self.order])

    def example_input(self, batch):
        return torch.randn(batch, 32)


def plain_tensor_index():
    return PlainTensorIndex()


def listed_tensor_index():
    return PlainTensorIndex(listed=True)


def act_cnn():
    return ActCNN()


def inplace_shift():
    return InplaceShift()


def cnn_small():
    return CNNSmall()


def res_cnn():
    return ResCNN()


def mlp():
    return MLP()


def gpt_small():
    """4 layers, d=128, seq 64, vocab 128: the tests' transformer."""
    return GPT(vocab=128, layers=4)


def gpt_bench():
    """4 layers, d=256, seq 128, vocab 2048: the benchmark's transformer."""
    return GPT(vocab=2048, seq=128, d=256, heads=8, layers=4)
