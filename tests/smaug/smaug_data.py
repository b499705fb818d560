"""Facts about ../shared/data/smaug from its README (§1.1, §1.2), shared by the SMAUG tests."""

from __future__ import annotations

SHA256 = {
    "minerva/minerva_ref_topo.pbtxt": "1da807a22cbf9e3f34f7d251f93216a9f91b77201c698bc0d32e4acea66ebe6d",
    "minerva/minerva_ref_params.pb": "b0ec61d614a0da2cb9a7730a63f7e776c362aea47ea53ca8038103a27cc65864",
    "minerva/minerva_smv_topo.pbtxt": "051ba8dd4206220e02558d3ee4f9481b0aacde26caa57928a79e38053e9b2d3c",
    "minerva/minerva_smv_params.pb": "c55650806a124ed38890a7b4306201565a5950b96cd6c2b86d68a8e98d3855f5",
    "lenet5/lenet5_ref_topo.pbtxt": "482fc3fef006cf22252ace29d4fea00a79a85929f6c6dfedc417a981579fb40a",
    "lenet5/lenet5_ref_params.pb": "efc0933faa5e544b1cd51ab54e0358ef229a37d93d39e9cb0d5ab85cdab1d859",
    "lenet5/lenet5_smv_topo.pbtxt": "dbcf63250d8102731dda5e4a62ab9d91fd48185136800f56cbff7ac564510000",
    "lenet5/lenet5_smv_params.pb": "7072bfe71b25ca6b4f90c3c6238cb9fed12a830ad17f4f4728abb60682e08fee",
    "cifar10-cnn/cnn_smv_topo.pbtxt": "5b4a69853490350282ecd089b044043973b0b8aa4513cc74ca5d38629143dff1",
    "cifar10-vgg/vgg_smv_topo.pbtxt": "08e85b2b7521426225e71152e5635085bf69e3ff84492fb2fe2d32696a330ac4",
    "imagenet-resnet/resnet_smv_topo.pbtxt": "1d190fb5902bda3d30bd579bfbc841ed9f57ff07d253be6719544ab3bd4a4718",
}
TOPOLOGIES = sorted(k for k in SHA256 if k.endswith("_topo.pbtxt"))
PARAMS = sorted(k for k in SHA256 if k.endswith("_params.pb"))
WITH_PARAMS = [t for t in TOPOLOGIES if t.replace("_topo.pbtxt", "_params.pb") in SHA256]

#: Node count and op counts per topology (data README §1.2).
COUNTS = {
    "minerva/minerva_ref_topo.pbtxt": (14, {"Data": 5, "InnerProduct": 4, "Reorder": 5}),
    "minerva/minerva_smv_topo.pbtxt": (10, {"Data": 5, "InnerProduct": 4, "Reorder": 1}),
    "lenet5/lenet5_ref_topo.pbtxt": (16, {"Convolution3d": 2, "Data": 5, "InnerProduct": 2, "MaxPooling": 1,
                                          "Reorder": 6}),
    "lenet5/lenet5_smv_topo.pbtxt": (11, {"Convolution3d": 2, "Data": 5, "InnerProduct": 2, "MaxPooling": 1,
                                          "Reorder": 1}),
    "cifar10-cnn/cnn_smv_topo.pbtxt": (31, {"BatchNorm": 3, "Convolution3d": 4, "Data": 19, "InnerProduct": 2,
                                            "MaxPooling": 2, "Reorder": 1}),
    "cifar10-vgg/vgg_smv_topo.pbtxt": (30, {"Convolution3d": 10, "Data": 13, "InnerProduct": 2, "MaxPooling": 4,
                                            "Reorder": 1}),
    "imagenet-resnet/resnet_smv_topo.pbtxt": (408, {"BatchNorm": 53, "Convolution3d": 53, "Data": 267,
                                                    "EltwiseAdd": 16, "InnerProduct": 1, "MaxPooling": 1,
                                                    "ReLU": 16, "Reorder": 1}),
}
#: Network input Data node and output tensor.
IO = {
    "minerva/minerva_ref_topo.pbtxt": ("data", "mat_mul_3/output0"),
    "minerva/minerva_smv_topo.pbtxt": ("data", "mat_mul_3/output0"),
    "lenet5/lenet5_ref_topo.pbtxt": ("data", "mat_mul_1/output0"),
    "lenet5/lenet5_smv_topo.pbtxt": ("data", "mat_mul_1/output0"),
    "cifar10-cnn/cnn_smv_topo.pbtxt": ("data", "mat_mul_1/output0"),
    "cifar10-vgg/vgg_smv_topo.pbtxt": ("data", "mat_mul_1/output0"),
    "imagenet-resnet/resnet_smv_topo.pbtxt": ("input", "fc/output0"),
}
#: Outputs for the shipped inputs, computed with SMAUG semantics (data README §1.3 item 9).
EXPECTED = {
    "minerva/minerva_ref_topo.pbtxt": [0.0013545, 0.0013653, 0.0012493, 0.0013382, 0.0012670, 0.0012264,
                                       0.0012154, 0.0013733, 0.0013554, 0.0012599],
    "minerva/minerva_smv_topo.pbtxt": [0.0013542, 0.0013657, 0.0012493, 0.0013380, 0.0012674, 0.0012264,
                                       0.0012150, 0.0013733, 0.0013552, 0.0012598],
    "lenet5/lenet5_ref_topo.pbtxt": [1.745e-4, 1.700e-4, 1.767e-4, 1.708e-4, 1.502e-4, 1.675e-4, 1.725e-4,
                                     1.680e-4, 1.538e-4, 1.692e-4],
    "lenet5/lenet5_smv_topo.pbtxt": [1.744e-4, 1.700e-4, 1.767e-4, 1.708e-4, 1.502e-4, 1.675e-4, 1.725e-4,
                                     1.680e-4, 1.538e-4, 1.693e-4],
}
#: Synthetic-parameter scale of each network's generator script (spec §10 item 3).
SCALE = {"imagenet-resnet/resnet_smv_topo.pbtxt": 0.008}
