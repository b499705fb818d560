"""The ONNX ↔ LBANN operator tables (specs/lbann-format.md §5, §8), used both ways.

Element-wise math is not a layer type in Era C but an ``operator_layer`` whose
``ops`` carry ``*Operator`` messages packed in ``google.protobuf.Any``. The
layer-level mappings (Conv ↔ convolution …) live in the import/export modules
as one registered function per layer type / ONNX op.
"""

from __future__ import annotations

#: ONNX unary op → LBANN operator message (one-to-one, same semantics).
UNARY: dict[str, str] = {
    "Abs": "AbsOperator", "Neg": "NegativeOperator", "Sign": "SignOperator", "Round": "RoundOperator",
    "Ceil": "CeilOperator", "Floor": "FloorOperator", "Reciprocal": "ReciprocalOperator",
    "Sqrt": "SqrtOperator", "Exp": "ExpOperator", "Log": "LogOperator", "Cos": "CosOperator",
    "Sin": "SinOperator", "Tan": "TanOperator", "Acos": "AcosOperator", "Asin": "AsinOperator",
    "Atan": "AtanOperator", "Cosh": "CoshOperator", "Sinh": "SinhOperator", "Tanh": "TanhOperator",
    "Acosh": "AcoshOperator", "Asinh": "AsinhOperator", "Atanh": "AtanhOperator", "Erf": "ErfOperator",
    "Sigmoid": "SigmoidOperator", "Softplus": "SoftplusOperator", "Softsign": "SoftsignOperator",
    "Selu": "SeluOperator",
}

#: ONNX binary op on two same-shape activations → LBANN operator.
BINARY: dict[str, str] = {
    "Add": "AddOperator", "Sub": "SubtractOperator", "Mul": "MultiplyOperator", "Div": "DivideOperator",
    "Pow": "PowOperator", "Max": "MaxOperator", "Min": "MinOperator",
}

#: ONNX binary op with a scalar constant c: (op, constant is the 2nd input) → LBANN operator.
WITH_CONSTANT: dict[tuple[str, bool], str] = {
    ("Add", True): "AddConstantOperator", ("Add", False): "AddConstantOperator",
    ("Mul", True): "ScaleOperator", ("Mul", False): "ScaleOperator",
    ("Sub", True): "SubtractConstantOperator", ("Sub", False): "ConstantSubtractOperator",
    ("Max", True): "MaxConstantOperator", ("Max", False): "MaxConstantOperator",
    ("Min", True): "MinConstantOperator", ("Min", False): "MinConstantOperator",
}

#: LBANN operators with a ``constant`` field → (ONNX op, constant goes first).
CONSTANT_OPS: dict[str, tuple[str, bool]] = {
    "AddConstantOperator": ("Add", False), "ScaleOperator": ("Mul", False),
    "SubtractConstantOperator": ("Sub", False), "ConstantSubtractOperator": ("Sub", True),
    "MaxConstantOperator": ("Max", False), "MinConstantOperator": ("Min", False),
}

#: LBANN operators without an ONNX twin, built from several ONNX ops on import.
COMPOSITE: dict[str, list[tuple[str, float | None]]] = {
    # each step: (ONNX op, constant operand or None); applied in order to the running value
    "SquareOperator": [("Mul", None)],
    "RsqrtOperator": [("Sqrt", None), ("Reciprocal", None)],
    "Expm1Operator": [("Exp", None), ("Sub", 1.0)],
    "Log1pOperator": [("Add", 1.0), ("Log", None)],
    "LogSigmoidOperator": [("Neg", None), ("Softplus", None), ("Neg", None)],
}

#: Operators that only exist from LBANN v0.104 on.
SINCE_V0104 = {"GeluOperator", "SelectOperator"}

#: Layer types that only matter for training: dropped on import (with what depends on them).
TRAINING_ONLY = {"cross_entropy", "mean_squared_error", "mean_absolute_error", "categorical_accuracy",
                 "top_k_categorical_accuracy", "l2_norm2", "l1_norm", "evaluation", "dummy", "in_top_k"}

#: Layer fields that do not change what a layer computes at inference, so import may pass them
#: by; any other set field an importer does not read is reported by name.
NO_EFFECT: dict[str, set[str]] = {
    # training statistics and LBANN's own unused initial values (no LBANN builder reads them)
    "batch_normalization": {"decay", "statistics_group_size", "stats_aggregation", "no_bessel_correction",
                            "scale_init", "bias_init"},
    "dropout": {"keep_prob"},  # identity at inference
    "bernoulli": {"prob"},  # zeros at inference
    "selu_dropout": {"keep_prob", "alpha", "scale"},
    "pooling": {"num_dims"},  # the window lists say it
    "convolution": {"conv_tensor_op_mode"},  # cuDNN math mode
    "deconvolution": {"conv_tensor_op_mode"},
    "entrywise_batch_normalization": {"decay"},
    "dist_embedding": {"sparse_sgd", "learning_rate", "barrier_in_forward_prop"},  # training and sharding
}

LBANN_VERSIONS = ("0.103", "0.104", "develop")
