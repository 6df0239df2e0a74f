"""fastlaunch.quantize on the GPU (skipped without CUDA): the same bytes as on the CPU, and weights and activations
quantised by it feed the masked grouped GEMM in its layouts, checked against the fp32 reference of the dequantised
operands."""
import torch

import fastlaunch
from fastlaunch import reference as R

from conftest import fresh_seed, requires_cuda

pytestmark = requires_cuda


def test_same_bytes_as_on_the_cpu():
    seed = fresh_seed()
    x = torch.randn(3, 300, 512, generator=torch.Generator().manual_seed(seed), dtype=torch.bfloat16) * 7
    for s in (None, 0.01):
        cpu = fastlaunch.quantize(x, s)
        gpu = fastlaunch.quantize(x.cuda(), s)
        for c, g in zip(cpu, gpu):
            assert torch.equal(c.view(torch.uint8), g.cpu().view(torch.uint8)), f"seed {seed}, global scale {s}"


def test_quantised_operands_feed_the_masked_form():
    seed = fresh_seed()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    G, max_m, n, k = 4, 96, 512, 1024
    a, sfa_plain, sfa = fastlaunch.quantize(torch.randn(G, max_m, k, device="cuda", generator=gen,
                                                        dtype=torch.bfloat16))
    b, sfb_plain, sfb = fastlaunch.quantize(torch.randn(G, n, k, device="cuda", generator=gen) * 0.05)
    masked_m = torch.tensor([96, 0, 17, 64], dtype=torch.int32, device="cuda")
    out = torch.full((G, max_m, n), float("nan"), dtype=torch.float16, device="cuda")
    before = out.clone()
    fastlaunch.grouped_mm_masked(a, sfa, b, sfb, masked_m, out)
    ref = R.ref_masked(a, sfa, b, sfb, masked_m)
    ok, msg = R.check_masked(out, ref, masked_m, before)
    assert ok, f"seed {seed}: {msg}"
    for e in range(G):  # the blocked scales are the plain ones, laid out
        assert torch.equal(R.unblock_scales(sfb[e], n).view(torch.uint8), sfb_plain[e].view(torch.uint8))
