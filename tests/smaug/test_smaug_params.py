"""Params encoding details (spec §4): alignment padding, fp16 pair packing, odd counts, decoding."""

from __future__ import annotations

import numpy as np
import pytest

from nnbridge.base.errors import FormatError
from nnbridge.converters.smaug.params import FIELD, decode, encode, pack_half, storage_size
from nnbridge.protos.smaug import smaug_tensor_pb2 as tpb
from nnbridge.protos.smaug import smaug_types_pb2 as pb


@pytest.mark.parametrize("dims, alignment, stored", [
    ([1, 28, 28, 1], 8, 6272), ([32, 3, 3, 1], 8, 2304), ([256, 784], 8, 200704), ([1, 32], 8, 32),
    ([3, 5], 0, 15), ([7], 8, 8)])
def test_storage_sizes(dims, alignment, stored):
    assert storage_size(dims, alignment) == stored


def test_fp16_pairs_low_half_first_with_odd_padding():
    words = pack_half(np.array([1.0, -2.0, 0.5], np.float16))
    assert [int(w) & 0xFFFFFFFF for w in words] == [0xC0003C00, 0x00003800]  # −2.0 high, 1.0 low
    assert words[0] < 0  # a negative int32: a 10-byte varint in the packed field, as protobuf does


@pytest.mark.parametrize("data_type, dtype", [(pb.Float16, np.float16), (pb.Float32, np.float32),
                                              (pb.Float64, np.float64), (pb.Int32, np.int32)])
def test_encode_pads_packs_and_decodes_back(data_type, dtype):
    array = (np.random.default_rng(1).standard_normal((3, 5)) * 50).astype(dtype)
    entry = encode("t/input0", array, data_type, 8)
    expected = tpb.TensorData(name="t/input0")
    padded = np.pad(array, [(0, 0), (0, 3)]).reshape(-1)
    getattr(expected, FIELD[data_type]).extend((pack_half(padded) if data_type == pb.Float16 else padded).tolist())
    assert entry.SerializeToString() == expected.SerializeToString()
    assert np.array_equal(decode(entry, [3, 5], data_type, 8, "t"), array)
    with pytest.raises(FormatError, match="expected 40"):
        decode(entry, [5, 5], data_type, 8, "t")
    with pytest.raises(FormatError, match="values stored in"):
        decode(entry, [3, 5], pb.Int64 if data_type != pb.Int64 else pb.Float32, 8, "t")
