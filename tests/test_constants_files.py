"""The simulators' constants are data files shipped beside their modules (``smv/config.toml``,
``rdu/presets.toml``): each reads into the Python API, and a missing or bad one is one error line
naming the file and the entry, never a traceback from deep inside the import."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from nnbridge.backends.rdu import presets
from nnbridge.backends.smv import config
from nnbridge.base.errors import RegistrationError
from nnbridge.base.fileio import read_constants


def test_every_constant_of_the_files_reaches_the_python_api():
    smv = tomllib.loads(config.CONSTANTS.read_text())
    declared = {f.name: f for f in dataclasses.fields(config.SmvConfig)}
    assert list(declared) == list(smv)
    for name, entry in smv.items():
        assert declared[name].type == entry["type"]
        assert declared[name].metadata == {"provenance": entry["provenance"], "doc": entry["doc"]}
    assert config.SmvConfig().spad_bytes == 32 * 1024  # written "32 KiB"
    rdu = tomllib.loads(presets.CONSTANTS.read_text())
    assert set(rdu) == {"assumed", *presets.PRESETS}
    for name, machine in presets.PRESETS.items():
        assert set(rdu[name]) <= set(machine.provenance)
        assert all(machine.provenance[key] == entry["provenance"] for key, entry in rdu[name].items())
    assert presets.SN40L.tiers[1].capacity_bytes == int(1.5 * 2**40)  # written "1.5 TiB"
    assert presets.SN10.pcu_lanes == presets.SN40L.pcu_lanes  # SN10 starts from SN40L


@pytest.mark.parametrize("text, says", [
    (None, "cannot read"),
    ("[spad_bytes\n", "is not valid TOML"),
    ('spad_bytes = 3\n', "entry 'spad_bytes' must be a table of value, provenance"),
    ('[spad_bytes]\nvalue = 3\n', "entry 'spad_bytes' must be a table of value, provenance"),
    ('[spad_bytes]\nvalue = "32 KB-ish"\nprovenance = "x"\n', "spad_bytes 32 KB-ish: write a size like"),
])
def test_a_bad_constants_file_is_one_line_naming_it(tmp_path: Path, text: str | None, says: str):
    path = tmp_path / "constants.toml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(RegistrationError) as raised:
        read_constants(path, ("value", "provenance"))
    message = str(raised.value)
    assert str(path) in message and says in message and "\n" not in message


def test_a_setting_whose_value_is_not_its_type_is_refused_by_name(tmp_path: Path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text('[num_pes]\ntype = "int"\nvalue = 8.5\nprovenance = "x"\ndoc = "y"\n')
    monkeypatch.setattr(config, "CONSTANTS", path)
    with pytest.raises(RegistrationError, match=r"config.toml \[num_pes\]: value 8.5 is not of its type 'int'"):
        config._settings(type("Probe", (), {}))
    path.write_text('[probe]\ntiers = { value = [{ name = "hbm" }], provenance = "x" }\n')
    monkeypatch.setattr(presets, "CONSTANTS", path)
    with pytest.raises(RegistrationError, match=r"config.toml \[probe\] tiers: .*missing .*bw_gbps"):
        presets._rows("probe")
