"""The complexity gate (tools/complexity.py) counts what radon rates D or worse, methods once,
classes never, generated code never, and fails on more than the allowed D count or on any E/F."""

from __future__ import annotations

from pathlib import Path

from tools import complexity


def _branchy(name: str, branches: int) -> str:
    """A function whose cyclomatic complexity is ``branches + 1``."""
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(branches))
    return f"def {name}(x):\n{body}    return -1\n"


def _package(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    (root / "protos").mkdir(parents=True)
    (root / "plain.py").write_text(_branchy("simple", 3) + _branchy("d_rated", 22))
    (root / "cls.py").write_text("class Thing:\n" + "".join(
        "    " + line + "\n" for line in _branchy("method", 33).replace("(x)", "(self, x)").splitlines()))
    (root / "protos" / "generated_pb2.py").write_text(_branchy("generated", 50))
    return root


def test_the_gate_counts_d_or_worse_methods_once_and_skips_generated_code(tmp_path):
    rated = complexity.rate(_package(tmp_path))
    assert [(r.name, r.rank) for r in rated] == [("Thing.method", "E"), ("d_rated", "D")]


def test_the_gate_fails_on_an_e_rated_function_or_too_many_d(tmp_path, capsys):
    root = _package(tmp_path)
    assert complexity.main([str(root), "--max-d", "5"]) == 1  # an E
    assert "1 rated E or F" in capsys.readouterr().out
    (root / "cls.py").unlink()
    assert complexity.main([str(root), "--max-d", "1"]) == 0
    assert complexity.main([str(root), "--max-d", "0"]) == 1
