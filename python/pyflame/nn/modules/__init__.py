"""The layer classes of pyflame.nn."""
from .module import Module, IncompatibleKeys, StateDictError
from .container import Sequential, ModuleList, ModuleDict
from .linear import Identity, Linear, Flatten
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .pooling import (MaxPool1d, MaxPool2d, MaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d,
                      AdaptiveAvgPool2d)
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, LayerNorm, GroupNorm,
                            RMSNorm)
from .activation import (ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax, LeakyReLU, ELU,
                         SELU, Softplus, Mish, Hardswish, Hardsigmoid, LogSigmoid)
from .dropout import Dropout
from .sparse import Embedding
from .loss import (MSELoss, CrossEntropyLoss, NLLLoss, BCELoss, L1Loss, KLDivLoss, SmoothL1Loss,
                   HuberLoss, BCEWithLogitsLoss)
from .upsampling import Upsample
from .distance import CosineSimilarity

__all__ = [
    "Module", "IncompatibleKeys", "StateDictError", "Sequential", "ModuleList", "ModuleDict",
    "Identity", "Linear", "Flatten", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
    "ConvTranspose2d", "ConvTranspose3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d",
    "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "LayerNorm", "GroupNorm", "RMSNorm", "ReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "Softmax",
    "LogSoftmax", "Dropout", "Embedding", "MSELoss", "CrossEntropyLoss", "NLLLoss", "BCELoss",
    "LeakyReLU", "ELU", "SELU", "Softplus", "Mish", "Hardswish", "Hardsigmoid", "LogSigmoid",
    "L1Loss", "KLDivLoss", "SmoothL1Loss", "HuberLoss", "BCEWithLogitsLoss", "Upsample",
    "CosineSimilarity",
]
