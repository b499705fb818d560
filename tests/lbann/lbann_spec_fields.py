"""The Era C field list of specs/lbann-format.md (develop numbering), transcribed per message.

Each line: ``Message: field=number …`` (section of the spec in the comment). Tests
check the schema against it and check that every field nnbridge writes is in it.
"""

from __future__ import annotations

_TABLE = """
# §3.1
LbannPB: data_reader=1 model=2 optimizer=3 data_set_metadata=5 trainer=6 training_algorithm=76
# §3.2
Trainer: name=1 random_init_trainers_identically=4 mini_batch_size=12 callback=20 random_seed=30 \
hydrogen_block_size=100 serialize_io=101 data_coordinator=200 training_algorithm=300
# §3.3
Model: objective_function=2 name=3 num_epochs=4 metric=5 data_layout=6 disable_cuda=8 layer=10 weights=11 \
subgraph_communication=13 callback=20 enable_subgraph_topology=27 subgraph_parent_grid_resources=29 summarizer=32 \
evaluation_frequency=54 amp=60 super_steps=121 num_batches=122
Model.Summarizer: dir=1
# §3.4
ObjectiveFunction: layer_term=1 l2_weight_regularization=2
ObjectiveFunction.LayerTerm: scale_factor=1 layer=2
ObjectiveFunction.L2WeightRegularization: scale_factor=1 weights=2
Metric: layer_metric=11 executable_metric=12 python_metric=13
Metric.LayerMetric: layer=1 name=2 unit=3
# §3.5
Optimizer: no_optimizer=1 adagrad=2 adam=3 hypergradient_adam=4 rmsprop=5 sgd=6
Optimizer.NoOptimizer:
Optimizer.AdaGrad: learn_rate=1 eps=2
Optimizer.Adam: learn_rate=1 beta1=6 beta2=7 eps=8 adamw_weight_decay=9
Optimizer.HypergradientAdam: init_learning_rate=1 hyper_learning_rate=2 beta1=6 beta2=7 eps=8
Optimizer.RMSprop: learn_rate=1 decay_rate=2 eps=3
Optimizer.SGD: learn_rate=1 momentum=2 nesterov=4
# §3.6
Callback: print=1 timer=2 summary=3 dump_weights=4 dump_outputs=5 adaptive_learning_rate=12 checkpoint=28 \
save_model=29 load_model=46 export_onnx=53
Callback.CallbackPrint: interval=1 print_global_stat_only=2
Callback.CallbackTimer: skip_steps=1
Callback.CallbackSummary: batch_interval=2 mat_interval=3
Callback.CallbackAdaptiveLearningRate: weights=1 patience=2 amt=3
Callback.CallbackCheckpoint: checkpoint_dir=1 checkpoint_epochs=2 checkpoint_steps=3 checkpoint_secs=4 \
per_rank_dir=5 ckpt_dist_epochs=6 ckpt_dist_steps=7 restart_dir=8
# §4.1, §4.2
Layer: name=1 parents=2 children=3 weights=4 device_allocation=5 datatype=6 hint_layer=10 data_layout=11 \
parallel_strategy=12 grid_tag=13 freeze=401 \
input=20 operator_layer=21 reshape=50 pooling=51 concatenation=52 slice=53 split=54 sum=55 \
cross_grid_sum_slice=56 cross_grid_sum=57 weighted_sum=58 unpooling=59 hadamard=60 constant=61 reduction=62 \
evaluation=63 gaussian=64 bernoulli=65 uniform=66 crop=67 dummy=68 stop_gradient=69 in_top_k=70 sort=71 \
weights_layer=72 tessellate=73 scatter=74 gather=75 batchwise_reduce_sum=76 permute=77 identity_zero=78 \
multidim_reduction=79 upsample=80 categorical_random=406 discrete_random=407 \
fully_connected=100 convolution=101 deconvolution=102 embedding=103 channelwise_scale_bias=104 \
entrywise_scale_bias=105 channelwise_fully_connected=106 gru=107 \
cross_entropy=120 mean_squared_error=121 mean_absolute_error=122 categorical_accuracy=123 \
top_k_categorical_accuracy=124 l2_norm2=125 l1_norm=126 matmul=140 dft_abs=141 \
batch_normalization=160 local_response_normalization=161 dropout=162 selu_dropout=163 \
entrywise_batch_normalization=164 layer_norm=165 instance_norm=166 \
elu=180 identity=181 leaky_relu=182 log_softmax=183 relu=184 softmax=185 \
bilinear_resize=200 rotation=201 composite_image_transformation=202 cutout=203 \
covariance=300 variance=301 channelwise_mean=302 mini_batch_index=303 mini_batch_size=304 argmax=305 \
argmin=306 one_hot=307 channelwise_softmax=309 dist_embedding=311 uniform_hash=312 rowwise_weights_norms=313 \
external=314
# §4.3
Input: data_field=1
Convolution: num_dims=1 out_channels=2 kernel_size=3 stride=4 padding=5 groups=7 has_bias=8 dilation=9 \
conv_tensor_op_mode=14
Deconvolution: num_dims=1 out_channels=2 kernel_size=3 stride=4 padding=5 output_padding=6 groups=7 \
has_bias=8 dilation=9 conv_tensor_op_mode=10
Pooling: pool_mode=1 num_dims=2 has_vectors=3 pool_dims=4 pool_pads=5 pool_strides=6 pool_dims_i=7 \
pool_pads_i=8 pool_strides_i=9
FullyConnected: num_neurons=1 has_bias=2 transpose=3
ChannelwiseFullyConnected: output_channel_dims=1 bias=2 transpose=3
BatchNormalization: decay=1 scale_init=2 bias_init=3 epsilon=4 stats_aggregation=5 statistics_group_size=6 \
no_bessel_correction=7
LayerNorm: epsilon=1 scale=2 bias=3 start_dim=4
InstanceNorm: epsilon=1
Relu:
Identity:
LogSoftmax:
LeakyRelu: negative_slope=1
Elu: alpha=1
Softmax: softmax_mode=1
ChannelwiseSoftmax: dim=1 single_dim_mode=2
Dropout: keep_prob=2
Reshape: dims=1
Concatenation: axis=1
Slice: axis=1 slice_points=2
Sum:
Hadamard:
Split:
Constant: value=1 num_neurons=2
WeightsLayer: dims=1
Tessellate: dims=1
TensorPermute: axes=1
MatMul: transpose_a=1 transpose_b=2
Embedding: num_embeddings=1 embedding_dim=2 padding_idx=3
ChannelwiseMean:
ChannelwiseScaleBias:
EntrywiseScaleBias:
LocalResponseNormalization: window_width=4 lrn_alpha=5 lrn_beta=6 lrn_k=7
CrossEntropy: use_labels=1
CategoricalAccuracy:
OperatorLayer: ops=1
# §5
Operator: input_datatype=1 output_datatype=2 device_allocation=3 parameters=4
ClampOperator: min=1 max=2
AddConstantOperator: constant=1
ScaleOperator: constant=1
SubtractConstantOperator: constant=1
ConstantSubtractOperator: constant=1
MaxConstantOperator: constant=1
MinConstantOperator: constant=1
# §6.1
Weights: name=1 optimizer=2 initializer=3 datatype=4 sharded=5 sharding_strategy=6
Initializer: constant_initializer=20 value_initializer=21 numpy_initializer=22 uniform_initializer=23 \
normal_initializer=24 glorot_normal_initializer=25 glorot_uniform_initializer=26 he_normal_initializer=27 \
he_uniform_initializer=28 lecun_normal_initializer=29 lecun_uniform_initializer=30
Initializer.ConstantInitializer: value=1
Initializer.ValueInitializer: values=1 values_d=2
Initializer.NumpyInitializer: file=1
Initializer.UniformInitializer: min=1 max=2
Initializer.NormalInitializer: mean=1 standard_deviation=2
# §2: wrapper types are written as sub-messages with one field
google.protobuf.BoolValue: value=1
google.protobuf.Int64Value: value=1
google.protobuf.UInt64Value: value=1
google.protobuf.DoubleValue: value=1
"""

#: fields whose availability depends on the LBANN version (§1): field → first version
SINCE = {("BatchNormalization", "no_bessel_correction"): "0.104", ("LayerNorm", "scale"): "0.104",
         ("LayerNorm", "bias"): "0.104", ("LayerNorm", "start_dim"): "develop",
         ("ChannelwiseSoftmax", "dim"): "0.104", ("ChannelwiseSoftmax", "single_dim_mode"): "0.104",
         ("Weights", "sharded"): "0.104", ("Initializer.ValueInitializer", "values_d"): "0.104"}
OPERATORS_SINCE = {"GeluOperator": "0.104", "SelectOperator": "0.104"}


def _parse() -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for line in _TABLE.replace("\\\n", " ").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, fields = line.partition(":")
        table[name.strip()] = {k: int(v) for k, v in (f.split("=") for f in fields.split())}
    return table


SPEC_FIELDS = _parse()

#: operators whose messages have no fields (§5), allowed as Any payloads
EMPTY_OPERATORS = """LogicalNot Abs Negative Sign Round Ceil Floor Reciprocal Square Sqrt Rsqrt SafeReciprocal Exp
Expm1 Log Log1p Cos Sin Tan Acos Asin Atan Cosh Sinh Tanh Acosh Asinh Atanh Erf ErfInv Gelu Add Subtract Multiply
Divide Mod Pow SafeDivide SquaredDifference Max Min Equal NotEqual Less LessEqual Greater GreaterEqual LogicalAnd
LogicalOr LogicalXor LogSigmoid LogSoftmax Selu Sigmoid Softplus Softsign""".split()
for _op in EMPTY_OPERATORS:
    SPEC_FIELDS.setdefault(f"{_op}Operator", {})
