import warnings

import pytest
import torch

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

HAS_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (runs on the H200 test GPU)")


def pytest_report_header(config):
    if HAS_CUDA:
        return f"CUDA: {torch.cuda.get_device_name()}; GPU tests run"
    return "CUDA: none; GPU tests are skipped"
