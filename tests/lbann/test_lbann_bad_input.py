"""Bad LBANN input: clear one-line errors, non-zero exit, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nnbridge
from nnbridge.base.errors import FormatError, SecurityError, UnsupportedOpError

HEADER = "# nnbridge-input: x 4 float32\n"


def _model(tmp_path: Path, layers: str, weights: str = "", name: str = "m.prototext") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + f"model {{\n  layer {{ name: \"x\" input {{ data_field: \"samples\" }} }}\n{layers}\n"
                    f"{weights}\n}}\n")
    return path


def _fc_with_numpy(tmp_path: Path, file: str) -> Path:
    return _model(tmp_path, '  layer { name: "fc" parents: "x" weights: "w" fully_connected { num_neurons: 2 } }',
                  f'  weights {{ name: "w" initializer {{ numpy_initializer {{ file: "{file}" }} }} }}')


def _cli(path: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nnbridge", "convert", str(path), str(out)],
                          capture_output=True, text=True)


def test_unknown_layer_type(tmp_path):
    path = _model(tmp_path, '  layer { name: "y" parents: "x" frobnicate {} }')
    with pytest.raises(FormatError, match=r'line 4, column 34: .*"frobnicate"'):
        nnbridge.load(path)
    run = _cli(path, tmp_path / "out.onnx")
    assert run.returncode == 1 and "frobnicate" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.onnx").exists()


def test_layer_type_without_onnx_equivalent_lists_all(tmp_path):
    path = _model(tmp_path, '  layer { name: "g" parents: "x" gru {} }\n  layer { name: "h" parents: "x" sort {} }')
    with pytest.raises(UnsupportedOpError, match="gru.*'g'.*sort.*'h'"):
        nnbridge.load(path)


def test_unknown_parent(tmp_path):
    path = _model(tmp_path, '  layer { name: "y" parents: "nope" relu {} }')
    with pytest.raises(FormatError, match="layer 'y' lists parent 'nope', which does not exist"):
        nnbridge.load(path)


def test_cycle(tmp_path):
    path = _model(tmp_path, '  layer { name: "a" parents: "x" parents: "b" sum {} }\n'
                            '  layer { name: "b" parents: "a" relu {} }')
    with pytest.raises(FormatError, match="cycle through layers a, b"):
        nnbridge.load(path)


def test_duplicate_layer_name(tmp_path):
    path = _model(tmp_path, '  layer { name: "x" relu {} }')
    with pytest.raises(FormatError, match="two layers are named 'x'"):
        nnbridge.load(path)


def test_missing_npy(tmp_path):
    with pytest.raises(FormatError, match="weights 'w': numpy file 'w.npy' is missing"):
        nnbridge.load(_fc_with_numpy(tmp_path, "w.npy"))


def test_truncated_npy(tmp_path):
    np.save(tmp_path / "w.npy", np.ones((2, 4), np.float32))
    data = (tmp_path / "w.npy").read_bytes()
    (tmp_path / "w.npy").write_bytes(data[:-5])
    with pytest.raises(FormatError, match="truncated"):
        nnbridge.load(_fc_with_numpy(tmp_path, "w.npy"))


def test_npy_wrong_shape_and_dtype(tmp_path):
    np.save(tmp_path / "w.npy", np.ones((4, 2), np.float32))
    with pytest.raises(FormatError, match=r"shape \[4, 2\]; the layer needs exactly \[2, 4\]"):
        nnbridge.load(_fc_with_numpy(tmp_path, "w.npy"))
    np.save(tmp_path / "w.npy", np.ones((2, 4), np.int32))
    with pytest.raises(FormatError, match="float32 or float64"):
        nnbridge.load(_fc_with_numpy(tmp_path, "w.npy"))


@pytest.mark.parametrize("file", ["../outside.npy", "/etc/passwd"])
def test_npy_path_escaping_the_model_dir(tmp_path, file):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    np.save(tmp_path / "outside.npy", np.ones((2, 4), np.float32))
    with pytest.raises(SecurityError):
        nnbridge.load(_fc_with_numpy(model_dir, file))
    run = _cli(_fc_with_numpy(model_dir, file), model_dir / "out.onnx")
    assert run.returncode == 1 and "escapes the model directory" in run.stderr


def test_absolute_npy_path_inside_the_model_dir_is_accepted(tmp_path):
    np.save(tmp_path / "w.npy", np.ones((2, 4), np.float32))
    graph = nnbridge.load(_fc_with_numpy(tmp_path, str((tmp_path / "w.npy").resolve())))
    assert graph.initializers["w"].shape == (2, 4)  # named after its LBANN weights object


def test_pickled_npy(tmp_path):
    np.save(tmp_path / "w.npy", np.array([{"evil": 1}, 2], dtype=object), allow_pickle=True)
    with pytest.raises(SecurityError, match="pickled"):
        nnbridge.load(_fc_with_numpy(tmp_path, "w.npy"))


def test_value_count_mismatch(tmp_path):
    path = _model(tmp_path, '  layer { name: "fc" parents: "x" weights: "w" fully_connected { num_neurons: 2 } }',
                  '  weights { name: "w" initializer { value_initializer { values: 1 values: 2 } } }')
    with pytest.raises(FormatError, match="holds 2 values; the layer needs 2×4 = 8"):
        nnbridge.load(path)


def test_undefined_weights_name(tmp_path):
    path = _model(tmp_path, '  layer { name: "fc" parents: "x" weights: "nope" fully_connected { num_neurons: 2 } }')
    with pytest.raises(FormatError, match="uses weights 'nope', which the model does not define"):
        nnbridge.load(path)


def test_writer_leaves_no_partial_output(tmp_path):
    import nnbridge.zoo

    out = tmp_path / "lstm.prototext"
    with pytest.raises(UnsupportedOpError):
        nnbridge.convert(nnbridge.zoo.build("lstm_small"), out, lbann_weights="npy")
    assert list(tmp_path.iterdir()) == []


ERA_B = """trainer { mini_batch_size: 64 }
model {
  layer { name: "data" children: "conv" input { target_mode: "classification" } }
  layer { name: "conv" parents: "data" convolution { num_dims: 2 num_output_channels: 8 conv_dims_i: 3 } }
  layer { name: "s" parents: "conv" sigmoid {} }
}
"""


def test_an_era_b_file_is_named_era_b_with_the_construct_that_shows_it(tmp_path):
    path = tmp_path / "b.prototext"
    path.write_text(ERA_B)
    with pytest.raises(FormatError, match=r"an Era B LBANN file \(v0.100–v0.102: convolution fields "
                                          r"num_output_channels.*LBANN v0.103 or later"):
        nnbridge.load(path)
    path.write_text(ERA_B.replace("num_output_channels: 8 conv_dims_i: 3", "out_channels: 8 kernel_size: 3"))
    with pytest.raises(FormatError, match="Era B .*'sigmoid' as a layer type"):
        nnbridge.load(path)


def test_a_stale_file_keeps_the_diagnosis_of_both_eras(tmp_path):
    """Files even LBANN v0.99 rejected (its own repository kept a few): not Era B, both parses named."""
    path = tmp_path / "stale.prototext"
    path.write_text('model {\n  mini_batch_size: 64\n  layer { name: "x" input {} }\n}\n'
                    'optimizer { sgd { learn_rate: 0.1 decay_rate: 0.5 } }\n')
    with pytest.raises(FormatError) as info:
        nnbridge.load(path)
    message = str(info.value)
    assert "Era B" not in message and "not an LBANN model of any supported schema era" in message
    assert 'as Era C (LBANN v0.103 and later): line 2' in message and '"decay_rate"' in message


def test_space_separated_parents_in_an_era_c_file_are_explained(tmp_path):
    path = _model(tmp_path, '  layer { name: "y" parents: "x x" relu {} }')
    with pytest.raises(FormatError, match="space-separated lists are Era A/B syntax"):
        nnbridge.load(path)
