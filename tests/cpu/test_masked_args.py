"""The masked form's argument checks in fastlaunch._C.grouped_mm_masked, on the CPU: the same messages as the op's
fake implementation (fastlaunch/ops.py) for every fault metadata shows, then the CUDA-device check."""
import pytest
import torch

import fastlaunch
from fastlaunch import ops
from fastlaunch import reference as R

from conftest import fresh_seed


def _args(g=3, max_m=200, n=72, k=256):
    return list(R.generate_masked_input(g, max_m, n, k, 5, fresh_seed(), device="cpu"))


def _faults():
    """(name, argument index, replacement) for one argument at a time."""
    a, sfa, b, sfb, mm, out = _args()
    return [
        ("a dtype", 0, a.view(torch.uint8).to(torch.int8)),
        ("a shape", 0, a[:, :100]),
        ("a 2-D", 0, a[0]),
        ("a strides", 0, a.view(torch.uint8).transpose(0, 1).contiguous().transpose(0, 1)),
        ("sfa dtype", 1, sfa.view(torch.uint8)),
        ("sfa shape", 1, sfa[:, :, :2]),
        ("b shape", 2, b[:2]),
        ("b N not a multiple of 8", 2, torch.zeros(3, 76, 128, dtype=torch.uint8)),
        ("sfb shape", 3, sfb[:, :, :2]),
        ("masked_m dtype", 4, mm.to(torch.int64)),
        ("masked_m shape", 4, mm[:2]),
        ("out dtype", 5, out.to(torch.float32)),
        ("out shape", 5, out[:, :100]),
        ("out strides", 5, out.transpose(1, 2).contiguous().transpose(1, 2)),
        ("not a tensor", 5, [1, 2]),
        ("alpha dtype", 6, torch.ones(3, dtype=torch.float64)),
        ("alpha shape", 6, torch.ones(4)),
        ("alpha strides", 6, torch.ones(3, 2)[:, 0]),
    ]


def _weight_only_args(g=3, max_m=200, n=72, k=256):
    """The weight-only form's arguments: a float16 [G, max_m, K], sfa None."""
    args = _args(g, max_m, n, k)
    args[0] = torch.randn(g, max_m, k, generator=torch.Generator().manual_seed(fresh_seed())).half()
    args[1] = None
    return args


def _weight_only_faults():
    a, sfa, *_rest = _args()
    x = _weight_only_args()[0]
    return [
        ("weight-only: sfa given", 1, sfa),
        ("weight-only: a float32", 0, x.float()),
        ("weight-only: a float64", 0, x.double()),
        ("weight-only: a K", 0, x[:, :, :100].contiguous()),
        ("weight-only: a K//2 as for NVFP4", 0, x[:, :, :128].contiguous()),
        ("weight-only: a strides", 0, x.transpose(0, 1).contiguous().transpose(0, 1)),
        ("NVFP4 a without sfa", 0, a),
    ]


@pytest.mark.parametrize("name,index,bad", _faults() + _weight_only_faults(),
                         ids=[f[0] for f in _faults() + _weight_only_faults()])
def test_messages_match_the_fake_implementation(name, index, bad):
    args = (_weight_only_args() if name.startswith(("weight-only", "NVFP4 a without")) else _args()) + [torch.ones(3)]
    args[index] = bad
    with pytest.raises((TypeError, ValueError)) as c_err:
        fastlaunch._C.grouped_mm_masked(*args)
    if isinstance(bad, torch.Tensor):
        with pytest.raises((TypeError, ValueError)) as fake_err:
            ops._check_masked_meta(*args[:6], alpha=args[6])
        assert (type(c_err.value), str(c_err.value)) == (type(fake_err.value), str(fake_err.value))
    else:
        assert str(c_err.value) == "out must be a torch.Tensor, got list"


def test_well_formed_cpu_tensors_stop_at_the_device_check():
    for extra in ([], [None], [torch.ones(3)]):  # no alpha, alpha None, alpha fp32 [G]
        args = _args() + extra
        with pytest.raises(ValueError, match=r"^a must be on a CUDA device, got cpu$"):
            fastlaunch._C.grouped_mm_masked(*args)
    args = _args()
    args[5] = args[5].to(torch.bfloat16)  # bf16 out passes the layout checks
    with pytest.raises(ValueError, match=r"^a must be on a CUDA device, got cpu$"):
        fastlaunch._C.grouped_mm_masked(*args)
    for extra in ([], [torch.ones(3)]):  # weight-only: a float16 [G, max_m, K], sfa None
        with pytest.raises(ValueError, match=r"^a must be on a CUDA device, got cpu$"):
            fastlaunch._C.grouped_mm_masked(*_weight_only_args(), *extra)


def test_argument_count():
    with pytest.raises(TypeError, match=r"takes 6 or 7 arguments, got 5"):
        fastlaunch._C.grouped_mm_masked(*_args()[:5])
    with pytest.raises(TypeError, match=r"takes 6 or 7 arguments, got 8"):
        fastlaunch._C.grouped_mm_masked(*_args(), None, None)
