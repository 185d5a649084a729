#!/usr/bin/python3
"""Writes the Python-made fixtures that the C++ tests read.

Run with Debian's python3-torch (1.13), from the repository root:
    /usr/bin/python3 tests/testdata/make_python_fixtures.py
The outputs are committed; CI does not need Python.
"""
import torch

torch.manual_seed(1234)
inputs = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 10.0
targets = torch.tensor([0, 2, 1, 3], dtype=torch.int64)
torch.save({"inputs": inputs, "targets": targets},
           "tests/testdata/python_training_data.pt")
# A tuple of inputs: tokens and a mask, as a transformer takes them.
tokens = torch.tensor([[5, 7, 9, 0], [1, 2, 3, 4]], dtype=torch.int64)
mask = tokens != 0
torch.save((tokens, mask), "tests/testdata/python_sample_tuple.pt")
