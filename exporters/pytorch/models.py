"""Small deterministic models shared by capture_joint.py and measure_eager.py.

build(name, batch) returns (model, x, target); the same name/batch/seed always
gives the same parameters and the same data, so a captured graph and an eager
measurement describe the same training step.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 0


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


class WithLoss(nn.Module):
    """Wraps a model so the cross-entropy loss is computed inside the traced
    function (the loss becomes the graph output)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, target):
        return F.cross_entropy(self.model(x), target)


MODELS = {
    "cnn_small": (CNNSmall, lambda b: (b, 3, 32, 32)),
    "mlp": (MLP, lambda b: (b, 64)),
}


def build(name, batch):
    """Deterministic (model, x, target) for one training step, train mode."""
    cls, in_shape = MODELS[name]
    torch.manual_seed(SEED)
    model = cls().train()
    x = torch.randn(*in_shape(batch))
    target = torch.randint(0, 10, (batch,))
    return model, x, target
