"""What the op tests on the CPU (tests/cpu/test_ops.py) and on the GPU (tests/gpu/test_ops_gpu.py) share: the task
tuple as the ops' lists, opcheck with every sub-check, and a small mixture-of-experts block over the masked op."""
import contextlib

import torch

import fastlaunch
from fastlaunch import reference as R

# Every sub-check torch.library.opcheck has (its default four and test_aot_dispatch_static).
OPCHECK_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_static",
                 "test_aot_dispatch_dynamic")
_BYTE_DTYPES = (torch.float8_e4m3fn, torch.float4_e2m1fn_x2)


def task_args(data):
    """The task tuple (abc, sf, sf_reordered, sizes) as grouped_gemm's lists (a, sfa, b, sfb, c)."""
    abc, _sf, sf_r, _sizes = data
    return ([t[0] for t in abc], [s[0] for s in sf_r], [t[1] for t in abc], [s[1] for s in sf_r],
            [t[2] for t in abc])


@contextlib.contextmanager
def bytewise_allclose():
    """opcheck's test_schema (torch's SchemaCheckMode) tells a mutated argument by comparing it before and after the
    call with torch.allclose(equal_nan=True), which has no kernel for float8_e4m3fn or float4_e2m1fn_x2
    (NotImplementedError). Inside this context torch.allclose compares tensors of those dtypes byte for byte (equal
    means unchanged, which is what the check asks) and everything else as before."""
    original = torch.allclose

    def allclose(x, y, *args, **kwargs):
        if x.dtype in _BYTE_DTYPES and y.dtype == x.dtype:
            return x.shape == y.shape and torch.equal(x.view(torch.uint8), y.view(torch.uint8))
        return original(x, y, *args, **kwargs)

    torch.allclose = allclose
    try:
        yield
    finally:
        torch.allclose = original


def opcheck_all(op, args):
    """torch.library.opcheck with every sub-check; raises on the first failure, returns the results."""
    with bytewise_allclose():
        result = torch.library.opcheck(op, args, test_utils=OPCHECK_UTILS)
    print(f"opcheck {op}: {result}")
    assert result == {name: "SUCCESS" for name in OPCHECK_UTILS}, result
    return result


# ============================================================================ a small mixture-of-experts block

def moe_inputs(tokens, hidden, experts, n, k, seed, device):
    """(h, w_router, x_q, x_sf, w_q, w_sf): router input h [tokens, hidden] and weight w_router [hidden, experts]
    (small integers, so that the router's sums are exact in fp32), already quantised NVFP4 token rows x_q
    [tokens, k//2] uint8 and their plain scales x_sf [tokens, k//16] float8_e4m3fn, the experts' weights
    w_q [experts, n, k//2] uint8 and blocked scales w_sf [experts, ceil(n/128), k//64, 32, 4, 4]."""
    gen = torch.Generator().manual_seed(seed)
    h = torch.randint(-2, 3, (tokens, hidden), generator=gen).float()
    w_router = torch.randint(-2, 3, (hidden, experts), generator=gen).float()
    x_q = torch.randint(0, 256, (tokens, k // 2), dtype=torch.uint8, generator=gen) & 0b1011_1011
    x_sf = torch.randint(1, 3, (tokens, k // 16), generator=gen).to(torch.float8_e4m3fn)
    _a, _sfa, w_q, w_sf, _m, _out = R.generate_masked_input(experts, 1, n, k, 0, seed + 1, device="cpu",
                                                            fp4_dtype=False)
    return tuple(t.to(device) for t in (h, w_router, x_q, x_sf, w_q, w_sf))


def moe_block(h, w_router, x_q, x_sf, w_q, w_sf, top_k: int = 2):
    """Routes each token to its top_k experts and runs them with one masked grouped GEMM; every size decided on the
    device (no .item(), no host read). Returns (y, masked_m, experts, rows):
    y [tokens, N] fp32, the gate-weighted sum of the token's expert outputs; masked_m int32 [G], tokens per expert;
    experts [tokens, top_k], the chosen experts; rows [tokens, top_k, N] fp16, the expert outputs gathered back.

    Gating: positive scores relu(h @ w_router) + 1 + e/64 (the e/64 breaks ties between experts), top_k of them,
    weights the chosen scores over their sum. h and w_router hold small integers, so every step is exact or one
    correctly rounded division: compiled and eager code agree to the bit."""
    tokens, kb = x_q.shape
    G, n = w_q.shape[0], w_q.shape[1]
    k = 2 * kb
    max_m = tokens  # a token's top_k experts are distinct: no expert gets more than `tokens` rows
    dev = x_q.device
    scores = torch.relu(h @ w_router) + 1 + torch.arange(G, device=dev, dtype=torch.float32) / 64
    top, experts = torch.topk(scores, top_k, dim=1)
    weights = top / top.sum(1, keepdim=True)
    flat = experts.reshape(-1)  # assignment i: token i // top_k to expert flat[i]
    onehot = (flat[:, None] == torch.arange(G, device=dev)).to(torch.int32)
    masked_m = onehot.sum(0, dtype=torch.int32)
    pos = (onehot.cumsum(0) - onehot).gather(1, flat[:, None]).squeeze(1)  # earlier assignments to the same expert
    token = torch.arange(tokens * top_k, device=dev) // top_k

    # Token rows into a [G, max_m, K//2]: assignment i becomes row pos[i] of expert flat[i].
    a = x_q.new_zeros((G, max_m, kb))
    a[flat, pos] = x_q[token]
    # Their scales into the blocked layout: row i, K block j of expert e at (e, i//128, j//4, i%32, (i%128)//32, j%4)
    # of a contiguous [G, ceil(max_m/128), K//64, 32, 4, 4] array, as a flat index.
    mt, kt = (max_m + 127) // 128, k // 64
    j = torch.arange(k // 16, device=dev)
    tile = (flat * mt + pos // 128)[:, None]
    index = (((tile * kt + j // 4) * 32 + (pos % 32)[:, None]) * 4 + ((pos % 128) // 32)[:, None]) * 4 + j % 4
    sfa = torch.zeros(G * mt * kt * 512, dtype=torch.uint8, device=dev)
    sfa[index] = x_sf.view(torch.uint8)[token]
    sfa = sfa.view(G, mt, kt, 32, 4, 4).view(torch.float8_e4m3fn)

    out = torch.empty((G, max_m, n), dtype=torch.float16, device=dev)  # rows past masked_m stay garbage, never read
    fastlaunch.grouped_mm_masked(a, sfa, w_q, w_sf, masked_m, out)
    rows = out[flat, pos].view(tokens, top_k, n)
    y = (rows.float() * weights[..., None]).sum(1)
    return y, masked_m, experts, rows


def moe_expected(h, w_router, x_q, x_sf, w_q, w_sf, experts):
    """On the host, for the experts a block chose: (masked_m int32 [G], rows fp32 [tokens, top_k, N] by the fp32
    reference, weights [tokens, top_k]) computed token by token without the blocked layouts."""
    G, n = w_q.shape[0], w_q.shape[1]
    experts = experts.cpu()
    counts = torch.zeros(G, dtype=torch.int32)
    for e in experts.flatten().tolist():
        counts[e] += 1
    x = R.dequantize(x_q.cpu(), x_sf.cpu())
    w = [R.dequantize(w_q[e].cpu(), R.unblock_scales(w_sf[e].cpu(), n)) for e in range(G)]
    rows = torch.stack([torch.stack([x[t] @ w[e].T for e in experts[t].tolist()]) for t in range(len(experts))])
    scores = torch.relu(h.cpu() @ w_router.cpu()) + 1 + torch.arange(G, dtype=torch.float32) / 64
    top = scores.gather(1, experts)
    return counts, rows, top / top.sum(1, keepdim=True)
