"""The ``_params.pb`` encoding: per-dtype value fields, last-dimension alignment
padding and fp16 pair packing into int32 words (specs/smaug-format.md §4).
"""

from __future__ import annotations

import math

import numpy as np

from ...base.errors import FormatError
from ...ir import DType
from ...protos.smaug import smaug_tensor_pb2 as tpb
from ...protos.smaug import smaug_types_pb2 as pb
from ..wire import field_header

#: SMAUG DataType ↔ IR DType, and the TensorData field holding each type's values.
TO_IR = {pb.Int32: DType.INT32, pb.Int64: DType.INT64, pb.Float16: DType.FLOAT16,
         pb.Float32: DType.FLOAT32, pb.Float64: DType.FLOAT64, pb.Bool: DType.BOOL}
FROM_IR = {v: k for k, v in TO_IR.items()}
#: SMAUG DataTypes that are not floating point, and those that are
NON_FLOAT = frozenset({pb.Int32, pb.Int64, pb.Bool})
FLOATS = frozenset({pb.Float16, pb.Float32, pb.Float64})
FIELD = {pb.Float16: "half_data", pb.Float32: "float_data", pb.Float64: "double_data",
         pb.Int32: "int_data", pb.Int64: "int64_data", pb.Bool: "bool_data"}


def ir_dtype(code: int, what: str) -> DType:
    if code not in TO_IR:
        raise FormatError(f"{what}: unsupported DataType value {code}")
    return TO_IR[code]


def padded_last(last: int, alignment: int) -> int:
    return last if alignment <= 0 else -(-last // alignment) * alignment


def storage_size(dims, alignment: int) -> int:
    """Stored element count: all dims but the last unpadded, the last rounded up (§4.3)."""
    if not dims:
        return 1
    return math.prod(dims[:-1]) * padded_last(dims[-1], alignment)


def pad_last(array: np.ndarray, alignment: int) -> np.ndarray:
    """Zero-pad the last axis up to a multiple of ``alignment``."""
    if array.ndim == 0:
        return array.reshape(1)
    extra = padded_last(array.shape[-1], alignment) - array.shape[-1]
    if extra == 0:
        return array
    widths = [(0, 0)] * (array.ndim - 1) + [(0, extra)]
    return np.pad(array, widths)


def pack_half(array: np.ndarray) -> np.ndarray:
    """fp16 values → int32 words, element 2k in the low half (odd counts get one zero)."""
    flat = np.ascontiguousarray(array, dtype=np.float16).reshape(-1)
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.float16)])
    return flat.view("<i4")


def unpack_half(words, count: int) -> np.ndarray:
    flat = np.asarray(words, dtype="<i4").view(np.float16)
    return flat[:count]


#: Fixed-width packed fields (little-endian) and their TensorData field numbers.
FIXED = {pb.Float32: ("<f4", 3), pb.Float64: ("<f8", 4)}


def encode(name: str, array: np.ndarray, data_type: int, alignment: int,
           entry: tpb.TensorData | None = None) -> tpb.TensorData:
    """One params entry (filled in place if given): the array padded per §4.3, in its type's field.

    Float fields are handed to protobuf as packed wire bytes (``MergeFromString``), which is far
    faster than a Python list for large weights; varint fields (fp16 pairs, ints) are extended."""
    entry = entry if entry is not None else tpb.TensorData()
    entry.name = name
    if data_type in FIXED:
        values = fixed_values(array, data_type, alignment)
        if values.size:
            entry.MergeFromString(field_header(FIXED[data_type][1], values.nbytes) + values.tobytes())
        return entry
    values = pad_last(np.asarray(array, dtype=TO_IR[data_type].numpy), alignment).reshape(-1)
    getattr(entry, FIELD[data_type]).extend((pack_half(values) if data_type == pb.Float16 else values).tolist())
    return entry


def fixed_values(array: np.ndarray, data_type: int, alignment: int) -> np.ndarray:
    """A float entry's stored values: padded per §4.3, flat, little-endian (its packed wire bytes)."""
    return np.ascontiguousarray(pad_last(np.asarray(array, dtype=FIXED[data_type][0]), alignment)).reshape(-1)


def decode(entry: tpb.TensorData, dims, data_type: int, alignment: int, what: str) -> np.ndarray:
    """The logical (unpadded) array of a params entry; checks the stored count (quirk Q9)."""
    if data_type not in FIELD:
        raise FormatError(f"{what}: unsupported DataType value {data_type}")
    field_name = FIELD[data_type]
    others = [f for f in FIELD.values() if f != field_name and len(getattr(entry, f))]
    if others:
        raise FormatError(f"{what}: values stored in '{others[0]}' but the tensor is "
                          f"{pb.DataType.Name(data_type)} (expected '{field_name}')")
    stored = storage_size(list(dims), alignment)
    raw = getattr(entry, field_name)
    if data_type == pb.Float16:
        words = len(raw)
        if words != (stored + 1) // 2:
            raise FormatError(f"{what} holds {2 * words} fp16 values, expected "
                              f"{stored} (dims {list(dims)}, alignment {alignment})")
        flat = unpack_half(raw, stored)
    else:
        if len(raw) != stored:
            raise FormatError(f"{what} holds {len(raw)} values, expected {stored} "
                              f"(dims {list(dims)}, alignment {alignment})")
        flat = np.asarray(raw, dtype=TO_IR[data_type].numpy)
    if not dims:
        return flat.reshape(())
    padded = list(dims[:-1]) + [padded_last(dims[-1], alignment)]
    return np.ascontiguousarray(flat.reshape(padded)[..., : dims[-1]])


#: protobuf's limit for one message: SMAUG reads all params as one TensorDataArray
MESSAGE_LIMIT = 2**31 - 1
_DATA_ARRAY = tpb.TensorDataArray.DESCRIPTOR.fields_by_name["data_array"].number


class ParamsFile:
    """The entries of a ``_params.pb`` (one TensorDataArray), encoded one at a time as the file is
    written: float entries go out as their array's own bytes after a small header, so a model's
    weights are never held a second time in a message (nor a third in its serialization)."""

    def __init__(self, alignment: int, what: str):
        self.alignment, self.what = alignment, what
        self.entries: list[tuple[str, np.ndarray, int, int]] = []

    def add(self, name: str, array: np.ndarray, data_type: int, alignment: int | None = None) -> None:
        """An entry, padded to ``alignment`` (default: the file's; a tensor may declare its own)."""
        self.entries.append((name, array, data_type, self.alignment if alignment is None else alignment))

    def chunks(self):
        """The file's bytes, entry by entry; refuses a file SMAUG could not read back (the caller
        writes atomically, so nothing is left behind)."""
        size = 0
        for name, array, data_type, alignment in self.entries:
            if data_type in FIXED:
                values = fixed_values(array, data_type, alignment)
                head = tpb.TensorData(name=name).SerializeToString()
                if values.size:
                    head += field_header(FIXED[data_type][1], values.nbytes)
                body = values.view(np.uint8).data
            else:
                head, body = encode(name, array, data_type, alignment).SerializeToString(), b""
            head = field_header(_DATA_ARRAY, len(head) + len(body)) + head
            size += len(head) + len(body)
            if size > MESSAGE_LIMIT:
                raise FormatError(f"SMAUG params of {self.what} exceed protobuf's 2 GiB limit for one message "
                                  f"(at '{name}'): SMAUG (and nnbridge) could not read the file back")
            yield head
            yield body

    def message(self) -> tpb.TensorDataArray:
        """The entries as one message (for readers in memory, e.g. ``graph_from_proto``)."""
        array = tpb.TensorDataArray()
        for name, values, data_type, alignment in self.entries:
            encode(name, values, data_type, alignment, array.data_array.add())
        return array
