"""SMAUG data layouts: enum mapping, dim permutations, the Reorder conversions the
runtime supports, per-backend expected layouts and the "same" padding rule.

Facts from specs/smaug-format.md §5 and §6.4; one table per rule.
"""

from __future__ import annotations

from ...base.errors import FormatError
from ...ir import Layout
from ...protos.smaug import smaug_types_pb2 as pb

#: SMAUG DataLayout enum ↔ IR Layout.
TO_IR = {pb.NCHW: Layout.NCHW, pb.NHWC: Layout.NHWC, pb.NC: Layout.NC, pb.CN: Layout.CN,
         pb.NCT: Layout.NCT, pb.NTC: Layout.NTC, pb.N: Layout.N, pb.X: Layout.X,
         pb.UnknownLayout: Layout.UNKNOWN}
FROM_IR = {v: k for k, v in TO_IR.items()}

#: The rank each SMAUG layout describes (X and Unknown: any).
RANK = {Layout.NCHW: 4, Layout.NHWC: 4, Layout.NC: 2, Layout.CN: 2, Layout.NCT: 3,
        Layout.NTC: 3, Layout.N: 1}

#: Axis letters of each layout; a permutation between two layouts of one rank maps letters.
_LETTERS = {Layout.NCHW: "NCHW", Layout.NHWC: "NHWC", Layout.NC: "NC", Layout.CN: "CN",
            Layout.NCT: "NCT", Layout.NTC: "NTC"}

#: Backend alignment of the last dimension (§4.3).
ALIGNMENT = {"Reference": 0, "SMV": 8}
BACKENDS = tuple(ALIGNMENT)


def ir_layout(code: int, what: str) -> Layout:
    if code not in TO_IR:
        raise FormatError(f"{what}: unknown DataLayout value {code}")
    return TO_IR[code]


def layout_for_rank(layout: Layout, rank: int) -> Layout:
    """Tolerate layout labels that do not match the rank (quirk Q16): use the rank default."""
    if RANK.get(layout) == rank:
        return layout
    return {1: Layout.N, 2: Layout.NC, 3: Layout.NCT, 4: Layout.NCHW}.get(rank, Layout.X)


def perm(src: Layout, dst: Layout) -> list[int] | None:
    """Axis permutation taking a tensor stored in ``src`` to ``dst`` (None: not a permutation)."""
    a, b = _LETTERS.get(src), _LETTERS.get(dst)
    if a is None or b is None or sorted(a) != sorted(b):
        return None
    return [a.index(ch) for ch in b]


def permute_dims(dims, src: Layout, dst: Layout) -> list[int]:
    p = perm(src, dst)
    if p is None:
        raise FormatError(f"no layout permutation from {src.value} to {dst.value}")
    return [dims[i] for i in p]


def reorder_supported(src: Layout, dst: Layout) -> bool:
    """The runtime's Reorder conversions (§5.2): 4-D transposes, flatten, NTC↔NCT, NC↔CN."""
    pairs = {(Layout.NCHW, Layout.NHWC), (Layout.NHWC, Layout.NCHW), (Layout.NTC, Layout.NCT),
             (Layout.NCT, Layout.NTC), (Layout.NC, Layout.CN), (Layout.CN, Layout.NC)}
    return (src, dst) in pairs or (src in (Layout.NCHW, Layout.NHWC) and dst in (Layout.NC, Layout.CN))


#: Native activation layout per backend: what conv/pool/BN read and write (§5.1).
ACTIVATION_4D = {"Reference": Layout.NCHW, "SMV": Layout.NHWC}
#: InnerProduct weight layout per backend: Reference [in,out] CN, SMV [out,in] NC.
FC_WEIGHT = {"Reference": Layout.CN, "SMV": Layout.NC}


def same_pads(kernel: int) -> tuple[int, int]:
    """SMAUG SamePadding: k−1 in total, the extra row/column on top/left (§6.4)."""
    total = kernel - 1
    begin = -(-total // 2)
    return begin, total - begin


def conv_out(size: int, kernel: int, stride: int, pad_total: int) -> int:
    return (size - kernel + pad_total) // stride + 1
