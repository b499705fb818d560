"""The real-architecture fixtures LBANN expresses are written in LBANN's own schema: protobuf's
strict parser reads every file, and every field set exists with that number in the LBANN schema
(0.104's or develop's; the numbers are checked against onnxruntime in tests/test_architecture_fixtures.py)."""

from __future__ import annotations

import pytest
from architecture_fixtures import CONVERTS, load
from lbann_helpers import assert_fields_in_spec, strict_parse

import nnbridge


@pytest.mark.parametrize("version", ["0.104", "develop"])
@pytest.mark.parametrize("name", sorted(CONVERTS["lbann"]))
def test_a_converted_architecture_is_in_lbanns_own_schema(name, version, tmp_path):
    path, feeds = load(name)
    destination = tmp_path / "m.prototext"
    nnbridge.convert(str(path), destination, input_shapes={k: v.shape for k, v in feeds.items()},
                     lbann_version=version)
    assert_fields_in_spec(strict_parse(destination), version)
