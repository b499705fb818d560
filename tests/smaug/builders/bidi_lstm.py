"""A bidirectional LSTM layer (32 inputs, 32 units each way, 4 timesteps), SMV."""

import numpy as np
import smaug as sg


def weights(shape):
  return (np.random.RandomState(1234).rand(*shape) * 0.005).astype(np.float16)


with sg.Graph(name="bidi_lstm_smv", backend="SMV") as graph:
  inputs = sg.input_data(sg.Tensor(data_layout=sg.NTC, tensor_data=weights((1, 4, 32))), name="input")
  forward, backward = [[sg.Tensor(data_layout=sg.NC, tensor_data=weights((128, 32))) for _ in range(2)]
                       for _ in range(2)]
  outputs, state_fwd, state_bwd = sg.nn.BidirectionalLSTM(forward, backward, name="bidi_lstm")(inputs)

graph.print_summary()
graph.write_graph()
