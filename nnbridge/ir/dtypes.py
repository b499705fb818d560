"""Element types of IR tensors, mapped to numpy (with ml_dtypes) and to ONNX codes."""

from __future__ import annotations

import enum

import numpy as np
from onnx import TensorProto, helper


class DType(enum.Enum):
    """Element type; the value is the ONNX ``TensorProto.DataType`` code."""

    FLOAT32 = TensorProto.FLOAT
    UINT8 = TensorProto.UINT8
    INT8 = TensorProto.INT8
    UINT16 = TensorProto.UINT16
    INT16 = TensorProto.INT16
    INT32 = TensorProto.INT32
    INT64 = TensorProto.INT64
    STRING = TensorProto.STRING
    BOOL = TensorProto.BOOL
    FLOAT16 = TensorProto.FLOAT16
    FLOAT64 = TensorProto.DOUBLE
    UINT32 = TensorProto.UINT32
    UINT64 = TensorProto.UINT64
    COMPLEX64 = TensorProto.COMPLEX64
    COMPLEX128 = TensorProto.COMPLEX128
    BFLOAT16 = TensorProto.BFLOAT16
    FLOAT8E4M3FN = TensorProto.FLOAT8E4M3FN
    FLOAT8E4M3FNUZ = TensorProto.FLOAT8E4M3FNUZ
    FLOAT8E5M2 = TensorProto.FLOAT8E5M2
    FLOAT8E5M2FNUZ = TensorProto.FLOAT8E5M2FNUZ
    UINT4 = TensorProto.UINT4
    INT4 = TensorProto.INT4
    FLOAT4E2M1 = TensorProto.FLOAT4E2M1
    FLOAT8E8M0 = TensorProto.FLOAT8E8M0
    UINT2 = TensorProto.UINT2
    INT2 = TensorProto.INT2

    @property
    def onnx(self) -> int:
        return self.value

    @property
    def numpy(self) -> np.dtype:
        if self is DType.STRING:
            return np.dtype(object)
        return np.dtype(helper.tensor_dtype_to_np_dtype(self.value))

    @property
    def short(self) -> str:
        return self.name.lower()

    @property
    def is_float(self) -> bool:
        return self in FLOAT_TYPES

    @property
    def is_int(self) -> bool:
        return self in INT_TYPES

    @property
    def itemsize(self) -> int:
        return 0 if self is DType.STRING else self.numpy.itemsize

    @classmethod
    def from_onnx(cls, code: int) -> DType:
        return cls(code)

    @classmethod
    def from_numpy(cls, dtype: np.dtype | type) -> DType:
        dtype = np.dtype(dtype)
        if dtype.kind in "OUS":
            return cls.STRING
        return cls(helper.np_dtype_to_tensor_dtype(dtype))


FLOAT_TYPES = frozenset({DType.FLOAT16, DType.FLOAT32, DType.FLOAT64, DType.BFLOAT16})
INT_TYPES = frozenset(
    {DType.INT8, DType.INT16, DType.INT32, DType.INT64,
     DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64}
)
NUMERIC_TYPES = FLOAT_TYPES | INT_TYPES
