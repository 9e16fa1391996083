#!/usr/bin/python3
"""Generate the recurrent speech-style model (issue 15) into models/speech.

Run with Debian's python (python3-torch 1.13.1, python3-onnx):

    /usr/bin/python3 models/speech.py [--out models/speech]

TinySpeechRecognizer: the shape of a CTC acoustic model (DeepSpeech 2, Amodei et al. 2016,
with its recurrent stack shrunk): 40 log-mel features per 10 ms frame, a 1-D convolution
front end over time (stride 2, as DeepSpeech's), two bidirectional LSTM layers, one
bidirectional GRU layer (torch's GRU, so ONNX's linear_before_reset=1), a linear layer to
29 characters and log-softmax. Batch 2, 64 frames. The LSTM starts from zero state; the GRU
from a learned initial state expanded over the batch, so the initial_h input is used.
torch exports the LSTM batch-major (batch_first=True: Transposes around the LSTM nodes) and
the GRU time-major. The folder holds model.onnx and test_data_set_0/{input_0,output_0}.pb
(torch f32).
"""

import argparse
import os

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn

FEATURES = 40
FRAMES = 64
BATCH = 2
CHARACTERS = 29


class TinySpeechRecognizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(FEATURES, 64, 5, stride=2, padding=2), nn.Hardtanh(0, 20))
        self.lstm = nn.LSTM(64, 48, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(96, 32, bidirectional=True)
        self.gru_h0 = nn.Parameter(torch.randn(2, 1, 32) * 0.5)
        self.classifier = nn.Linear(64, CHARACTERS)

    def forward(self, features):  # [batch, frames, features]
        x = self.front(features.transpose(1, 2)).transpose(1, 2)  # [batch, frames/2, 64]
        x, _ = self.lstm(x)
        x = x.transpose(0, 1)  # time-major for the GRU
        x, _ = self.gru(x, self.gru_h0.expand(-1, x.shape[1], -1).contiguous())
        return torch.log_softmax(self.classifier(x), dim=-1)  # [frames/2, batch, characters]


def write(path, array):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array)).SerializeToString())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "speech"))
    args = parser.parse_args()
    torch.manual_seed(1510)
    torch.set_num_threads(1)
    model = TinySpeechRecognizer().eval()
    x = torch.randn(BATCH, FRAMES, FEATURES, generator=torch.Generator().manual_seed(1511))
    with torch.no_grad():
        y = model(x)
        y64 = model.double()(x.double())
        model.float()
    folder = os.path.join(args.out, "TinySpeechRecognizer_op17")
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    torch.onnx.export(model, (x,), path, opset_version=17, input_names=["features"], output_names=["log_probs"],
                      do_constant_folding=True)
    onnx.checker.check_model(onnx.load(path))
    write(os.path.join(folder, "test_data_set_0", "input_0.pb"), x.numpy())
    write(os.path.join(folder, "test_data_set_0", "output_0.pb"), y.numpy())
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    error = (y.double() - y64).abs().max().item()
    print(f"{folder}: output {list(y.shape)}, torch f32 vs f64 {error:.2e}; ops: {', '.join(ops)}")


if __name__ == "__main__":
    main()
