"""The built extension holds the sm_100a kernel family with the tcgen05 instructions it is built on.

No Blackwell GPU runs here, so this disassembles the extension (cuobjdump, from PyPI's
nvidia-cuda-cuobjdump with nvidia-cuda-nvdisasm, both in requirements.txt) and checks the SASS:
UTCOMMA.4X is tcgen05.mma .kind::mxf4nvf4 .block16 (4 scale factors per 64 K), UTCCP tcgen05.cp, LDTM
tcgen05.ld, UTCBAR tcgen05.commit, UTMALDG a TMA tile load. The sm_90a code must keep its HGMMA.

Every mbarrier wait of the sm_100a kernels is bounded (ptx::mbar_wait_bounded): a first try, then a loop that reads
the SM clock and traps past the limit. In SASS each wait is two SYNCS.PHASECHK.TRANS64.TRYWAIT (the first try and the
loop's), two reads of SR_CLOCKLO and one BPT.TRAP (ptxas adds 3 BPT.TRAP of its own to each kernel besides).
"""
import collections
import re


KERNEL = "nvfp4_group_gemm"
# Instruction -> the least count over the sm_100a kernels (4 variants: 16/256 groups x one-tile/persistent).
SM100_EXPECTED = {"UTCOMMA": 4, "UTCCP": 8, "LDTM": 4, "UTCBAR": 8, "UTMALDG": 8, "UBLKCP": 8}


def _opcodes(text):
    """Opcode base names (before the first '.') of every SASS instruction, counted."""
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", text)
    return collections.Counter(ops)


def test_sm100_kernels_present(sass):
    names = re.findall(r"Function : (\S+)", sass["sm_100a"])
    assert len([n for n in names if KERNEL in n]) == 4, names


def test_sm100_has_tcgen05_mma_and_tensor_memory_ops(sass):
    ops = _opcodes(sass["sm_100a"])
    missing = {op: (ops.get(op, 0), want) for op, want in SM100_EXPECTED.items() if ops.get(op, 0) < want}
    assert not missing, f"sm_100a SASS lacks (found, want): {missing}; opcodes: {sorted(ops)}"
    # The MMA is the block-scaled FP4 one with four scales per 64 K (NVFP4), not a dense or MXF8 kind.
    mma = re.findall(r"\bUTCOMMA(\.\S+)? ", sass["sm_100a"])
    assert mma and all(m == ".4X" for m in mma), mma
    assert ops.get("HGMMA", 0) == 0


def test_sm90_code_unchanged_in_kind(sass):
    ops = _opcodes(sass["sm_90a"])
    assert ops.get("HGMMA", 0) > 0, "the sm_90a kernel lost its wgmma"
    assert ops.get("UTCOMMA", 0) == 0


def _kernels(text):
    """{kernel name: its SASS} of the sm_100a kernel family."""
    parts = re.split(r"Function : (\S+)", text)[1:]
    return {name: body for name, body in zip(parts[::2], parts[1::2]) if KERNEL in name}


def test_sm100_barrier_waits_are_bounded(sass):
    kernels = _kernels(sass["sm_100a"])
    assert len(kernels) == 4, list(kernels)
    for name, body in kernels.items():
        tries = body.count("SYNCS.PHASECHK.TRANS64.TRYWAIT")
        clocks = len(re.findall(r"CS2R\s+R\d+,\s+SR_CLOCKLO", body))
        traps = _opcodes(body).get("BPT", 0)
        # 3 waits in the one-tile-per-CTA kernel, 4 in the persistent one (its MMA warp waits for a free accumulator)
        waits = 4 if "Lb1E" in name else 3
        assert tries == 2 * waits and clocks == 2 * waits, (name, tries, clocks)
        assert traps >= waits, (name, traps)
