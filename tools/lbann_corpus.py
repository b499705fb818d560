"""Write LBANN's own corpus for nnbridge's tests from a git copy of LLNL/lbann.

Three parts, each a folder of ``OUT`` (committed as ``tests/fixtures/lbann_corpus/``, with a README giving
every file's provenance, licence and SHA-256):

- ``v099/``: LBANN v0.99's model files as the tag holds them (``model_zoo/models``,
  ``model_zoo/tests``, ``bamboo/unit_tests``): every ``.prototext`` with a model that parses with
  v0.99's schema, except the ``*template*`` files (inputs of LBANN's generator scripts).
- ``unit_tests/``: the experiments of LBANN's unit tests (``ci_test/unit_tests/test_unit_*.py`` at
  ``--develop``) as LBANN's own Python frontend writes them: each script's setup function is
  called as LBANN's ``tools.create_tests`` would, and the experiment saved with
  ``lbann.proto.save_prototext``. Beside each file: ``<name>.npz``, the samples its Python data
  reader serves (the script's own ``get_sample``), and ``index.json`` (script, reader, sample dims).
- ``models/``: ``lbann.models`` builders (LeNet, AlexNet, ResNets, Transformer) applied to one
  input, as LBANN's frontend writes them.

LBANN's frontend runs from a temporary ``git archive`` of the checkout; it needs protobuf modules
of LBANN's schema, which here are nnbridge's (``nnbridge/protos/lbann/lbann_pb2.py``, generated
from the facts of LBANN's schema) under LBANN's module names. Nothing of LBANN is built.
Each unit-test script runs in its own process (LBANN's layer names count per process). Two runs
differ only where LBANN's frontend does: it lists a model's weights in set order, and a few scripts
draw unseeded samples; the tests compare weights by name.

    python tools/lbann_corpus.py GIT_DIR OUT [--part v099 --part unit_tests --part models]

``GIT_DIR`` is a git directory of LLNL/lbann holding tag v0.99 and the ``--develop`` commit.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import inspect
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEVELOP = "04c297bddf76144385be8ce39cab9394b47401a3"
V099 = "v0.99"
V099_DIRS = ("model_zoo/models", "model_zoo/tests", "bamboo/unit_tests")
PARTS = ("v099", "unit_tests", "models")
#: LBANN's frontend imports these protobuf modules; all are nnbridge's one Era C module
PB2_MODULES = ("lbann", "callbacks", "data_coordinator", "datatype", "layers", "metrics", "model",
               "objective_functions", "operators", "optimizers", "reader", "trainer", "training_algorithm",
               "transforms", "weights")
#: what LBANN's build writes into ``lbann/lbann_features.py``: a GPU build with distconv, as LBANN's CI
#: runs its unit tests on (scripts for features a build lacks skip themselves)
FEATURES = ("GPU", "DISTCONV", "NVSHMEM", "CUTENSOR", "CUTT", "FFT", "ONEDNN", "CUDNN", "VISION", "OPENCV", "HALF",
            "GPU_FP16", "ONNX", "PYTHON", "NCCL", "ALUMINUM")
#: where the generating checkout's absolute paths are written instead (as in ../frontend/)
CHECKOUT = "/opt/lbann"
#: lbann.models builders LBANN's frontend runs for models/: file stem → (builder, keyword arguments);
#: image models take Input(data_field='samples', name='samples'), the Transformer that input
#: reshaped to a [16, 64] sequence as source and target (target_length 16). Written beside them
#: as models/index.json, which the test reads to build the same with nnbridge.lbann.models.
MODELS: dict[str, tuple[str, dict]] = {
    "lenet": ("LeNet", {"output_size": 10, "name": "lenet_module1"}),
    "alexnet": ("AlexNet", {"output_size": 1000, "name": "alexnet_module1"}),
    "resnet18": ("ResNet18", {"output_size": 1000, "name": "resnet18_module1"}),
    "resnet18_no_zero_init_bn_stats_0": ("ResNet18", {"output_size": 10, "zero_init_residual": False,
                                                      "bn_statistics_group_size": 0, "name": "r18"}),
    "resnet34": ("ResNet34", {"output_size": 1000, "name": "resnet34_module1"}),
    "resnet50": ("ResNet50", {"output_size": 1000, "name": "resnet50_module1"}),
    "resnet101": ("ResNet101", {"output_size": 1000, "name": "resnet101_module1"}),
    "resnet152": ("ResNet152", {"output_size": 1000, "name": "resnet152_module1"}),
    "wide_resnet34_2": ("ResNet34", {"output_size": 100, "width": 2, "name": "wide_resnet34"}),
    "transformer": ("Transformer", {"hidden_size": 64, "num_heads": 4, "num_encoder_layers": 2,
                                    "num_decoder_layers": 2, "feedforward_size": 128, "dropout": 0.1,
                                    "name": "transformer"}),
    "transformer_pre_layernorm_heads_on_grids": ("Transformer", {
        "hidden_size": 64, "num_heads": 4, "num_encoder_layers": 1, "num_decoder_layers": 1, "dropout": 0.0,
        "attn_dropout": 0.1, "pre_layernorm": True, "parallel_attention_heads": 2, "name": "t2"}),
    "transformer_encoder_only": ("Transformer", {"hidden_size": 64, "num_heads": 2, "num_encoder_layers": 3,
                                                 "num_decoder_layers": 0, "name": "enc"}),
}


def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- v0.99 --------------------------------------------------------------------------------------

def fresh(folder: Path) -> Path:
    """``folder``, emptied: a part is written whole, with nothing left of an earlier run."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def write_v099(git_dir: Path, out: Path) -> list[dict]:
    from google.protobuf import text_format

    from nnbridge.protos.lbann import lbann_v099_pb2

    names = git(git_dir, "ls-tree", "-r", "--name-only", V099, *V099_DIRS).decode().split("\n")
    fresh(out / "v099")
    rows = []
    for name in sorted(n for n in names if n.endswith(".prototext") and "template" not in n):
        text = git(git_dir, "show", f"{V099}:{name}")
        message = lbann_v099_pb2.LbannPB()
        try:
            text_format.Parse(text.decode(), message)
        except (text_format.ParseError, UnicodeDecodeError):
            continue  # stale in v0.99 already: its own schema refuses it
        if not message.model.layer:
            continue  # a data reader or optimizer file
        target = out / "v099" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text)
        blob = git(git_dir, "rev-parse", f"{V099}:{name}").decode().strip()
        rows.append({"file": f"v099/{name}", "upstream": f"tag {V099}, {name}", "blob": blob})
    return rows


# -- LBANN's frontend ---------------------------------------------------------------------------

def unpack(git_dir: Path, into: Path) -> Path:
    """The frontend, the unit tests and what they import, from the develop commit."""
    archive = git(git_dir, "archive", DEVELOP, "python", "ci_test", "model_zoo/data_readers")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "python" / "lbann" / "lbann_features.py").write_text(
        f"lbann_features = {set(FEATURES)!r}\n"
        "def has_feature(feature_name):\n    return feature_name.upper() in lbann_features\n"
        "def get_features():\n    return lbann_features\n")
    shim = into / "pb2"
    shim.mkdir()
    for module in PB2_MODULES:
        (shim / f"{module}_pb2.py").write_text(
            "import sys\nfrom nnbridge.protos.lbann import lbann_pb2\nsys.modules[__name__] = lbann_pb2\n")
    (shim / "config.ini").write_text(f"[Paths]\nlbann_pb2.py = {shim / 'lbann_pb2.py'}\nlbann_exe = /bin/false\n")
    return shim / "config.ini"


def frontend_env(root: Path, config: Path) -> dict[str, str]:
    """LBANN's frontend reads ``FieldDescriptor.label``, which protobuf 7 dropped: its pure-Python
    implementation is used, where ``worker`` puts the attribute back (``_protobuf_label``)."""
    paths = [str(REPO), str(root / "python"), str(root / "ci_test" / "common_python")]
    return {**os.environ, "LBANN_PYTHON_CONFIG_FILE": str(config), "PYTHONPATH": os.pathsep.join(paths),
            "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"}


def run_worker(root: Path, config: Path, args: list[str]) -> dict:
    done = subprocess.run([sys.executable, __file__, "--worker", str(root), *args], env=frontend_env(root, config),
                          capture_output=True, text=True, timeout=300, cwd=root)
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_unit_tests(git_dir: Path, out: Path, root: Path, config: Path) -> list[dict]:
    target = fresh(out / "unit_tests")
    index, rows = {}, []
    for script in sorted((root / "ci_test" / "unit_tests").glob("test_unit_*.py")):
        result = run_worker(root, config, ["unit_test", str(script), str(target)])
        blob = git(git_dir, "rev-parse", f"{DEVELOP}:ci_test/unit_tests/{script.name}").decode().strip()
        for name, info in result.get("experiments", {}).items():
            index[name] = {"script": f"ci_test/unit_tests/{script.name}", "blob": blob, **info}
            upstream = f"generated from develop {DEVELOP[:8]}, ci_test/unit_tests/{script.name}"
            rows.append({"file": f"unit_tests/{name}.prototext", "upstream": upstream, "blob": blob})
            if (target / f"{name}.npz").is_file():
                rows.append({"file": f"unit_tests/{name}.npz", "upstream": f"its data reader's samples, {upstream}",
                             "blob": blob})
        why = result.get("error") or result.get("skipped") or ("" if result.get("experiments") else
                                                                "no experiment (it calls no tools.create_tests)")
        if why:
            index.setdefault("_not_generated", {})[script.name] = why
    for npy in sorted((root / "ci_test" / "unit_tests" / "temp").glob("*.npy")):  # numpy_initializer files
        (target / "temp").mkdir(exist_ok=True)
        (target / "temp" / npy.name).write_bytes(npy.read_bytes())
        rows.append({"file": f"unit_tests/temp/{npy.name}", "upstream": "written by the script that names it",
                     "blob": ""})
    (target / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return rows


def write_models(out: Path, root: Path, config: Path) -> list[dict]:
    target = fresh(out / "models")
    result = run_worker(root, config, ["models", str(target)])
    if "error" in result:
        raise SystemExit(f"lbann.models: {result['error']}")
    return [{"file": f"models/{stem}.prototext",
             "upstream": f"lbann.models.{builder}({', '.join(f'{k}={v!r}' for k, v in kw.items())}) at develop "
                         f"{DEVELOP[:8]}", "blob": ""}
            for stem, (builder, kw) in MODELS.items()]


# -- inside the frontend's process --------------------------------------------------------------

def _protobuf_label() -> None:
    """``FieldDescriptor.label`` as protobuf < 7 gave it (LBANN's ``core/util.py`` reads it)."""
    from google.protobuf import descriptor

    if not hasattr(descriptor.FieldDescriptor, "label"):
        descriptor.FieldDescriptor.label = property(
            lambda f: f.LABEL_REPEATED if f.is_repeated else f.LABEL_REQUIRED if f.is_required else f.LABEL_OPTIONAL)


def _save(lbann, path: Path, root: str | None, **parts) -> None:
    """LBANN's save_prototext; the generating checkout's paths (under ``root``) as /opt/lbann."""
    lbann.proto.save_prototext(str(path), **{k: v for k, v in parts.items() if v is not None})
    if root:
        path.write_text(path.read_text().replace(root, CHECKOUT))


def _reader_data(lbann, module, reader) -> dict:
    """Sample dims and samples of the experiment's Python data readers (by role)."""
    dims, samples = {}, {}
    for r in reader.reader if reader is not None else []:
        if r.HasField("python_dataset"):  # the dataset object the script pickled for LBANN's reader
            import pickle

            with open(r.python_dataset.dataset_path, "rb") as f:
                dataset = pickle.load(f)  # noqa: S301 - LBANN's script wrote it a moment ago
            dims[r.role] = [int(d) for d in dataset.get_sample_dims().sample]
            samples[r.role] = np.stack([np.asarray(dataset[i].sample, dtype=np.float32).reshape(-1)
                                        for i in range(len(dataset))])
            continue
        if not r.HasField("python"):
            continue
        mod = module if r.python.module == module.__name__ else importlib.import_module(r.python.module)
        dims[r.role] = [int(d) for d in getattr(mod, r.python.sample_dims_function)()]
        count = int(getattr(mod, r.python.num_samples_function)())
        get = getattr(mod, r.python.sample_function)
        samples[r.role] = np.stack([np.asarray(get(i), dtype=np.float32).reshape(-1) for i in range(count)])
    return {"dims": dims, "samples": samples}


def worker_unit_test(script: Path, target: Path) -> dict:
    import lbann
    import lbann.proto

    import tools

    recorded = []
    tools.create_tests = lambda setup, test_file, test_name_base=None, **kw: recorded.append(
        (setup, test_name_base)) or ()
    spec = importlib.util.spec_from_file_location(script.stem, script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[script.stem] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # LBANN's pytest.skip: GPUs, cuDNN … this machine has not
        if type(exc).__name__ == "Skipped":
            return {"skipped": str(exc)}
        raise
    experiments = {}
    for i, (setup, base) in enumerate(recorded):
        name = base or (script.stem if len(recorded) == 1 else f"{script.stem}_{i}")
        name = name if name.startswith("test_") else f"test_{name}"
        made = setup(lbann, False) if len(inspect.signature(setup).parameters) >= 2 else setup(lbann)
        trainer, model, reader, optimizer = made[:4]
        _save(lbann, target / f"{name}.prototext", str(script.parent.parent.parent), trainer=trainer, model=model,
              data_reader=reader, optimizer=optimizer)
        data = _reader_data(lbann, module, reader)
        if data["samples"]:
            np.savez(target / f"{name}.npz", **data["samples"])
        experiments[name] = {"reader": reader is not None, "dims": data["dims"]}
    return {"experiments": experiments}


def worker_models(target: Path) -> dict:
    import lbann
    import lbann.models
    import lbann.proto

    for stem, (builder, kwargs) in MODELS.items():
        x = lbann.Input(data_field="samples", name="samples")
        model = getattr(lbann.models, builder)(**kwargs)
        if builder == "Transformer":
            sequence = lbann.Reshape(x, dims=[16, 64])
            model(sequence, sequence, 16)
        else:
            model(x)
        _save(lbann, target / f"{stem}.prototext", None, model=lbann.Model(0, layers=lbann.traverse_layer_graph(x)))
    (target / "index.json").write_text(json.dumps({stem: {"builder": b, "kwargs": kw} for stem, (b, kw) in
                                                   MODELS.items()}, indent=1) + "\n")
    return {"models": list(MODELS)}


# -- README -------------------------------------------------------------------------------------

def write_readme(out: Path, rows: list[dict], parts: list[str]) -> None:
    """README.md with every file's provenance: this run's rows replace those of the parts it wrote
    (``provenance.json`` keeps the rows of every part written so far)."""
    kept = out / "provenance.json"
    earlier = json.loads(kept.read_text()) if kept.is_file() else []
    rows = [r for r in earlier if r["file"].split("/", 1)[0] not in parts] + rows
    rows.sort(key=lambda r: r["file"])
    kept.write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "# LBANN's corpus for nnbridge's tests",
        "",
        "Written by nnbridge's `tools/lbann_corpus.py` from a git copy of LLNL/lbann: `v099/` holds the model "
        "files of tag v0.99 (commit 018018b5) byte for byte; `unit_tests/` and `models/` were written by "
        f"LBANN's own Python frontend at develop {DEVELOP} (its unit-test scripts' setup functions and "
        "`lbann.models` builders; the generating checkout's absolute paths written as `/opt/lbann`).",
        "",
        "Licence: LBANN is Copyright (c) 2014-2024, Lawrence Livermore National Security, LLC, "
        "LLNL-CODE-697807, licensed under the Apache License, Version 2.0 "
        "(http://www.apache.org/licenses/LICENSE-2.0); this README is the notice the licence asks for.",
        "",
        "| file | upstream | git blob |",
        "|---|---|---|",
    ]
    lines += [f"| `{r['file']}` | {r['upstream']} | {r['blob'][:12]} |" for r in rows]
    lines += ["", "SHA-256:", "```"]
    lines += [f"{sha256(path)}  {path.relative_to(out)}" for path in sorted(out.rglob("*"))
              if path.is_file() and path.name not in ("README.md", "provenance.json")]
    lines += ["```", ""]
    (out / "README.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        root, kind, *rest = argv[1:]
        _protobuf_label()
        sys.path.insert(0, str(Path(rest[0]).parent) if kind == "unit_test" else root)
        result = worker_unit_test(Path(rest[0]), Path(rest[1])) if kind == "unit_test" else \
            worker_models(Path(rest[0]))
        print(json.dumps(result))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", type=Path, help="a git directory of LLNL/lbann (tag v0.99, develop commit)")
    parser.add_argument("out", type=Path, help="the folder to write (e.g. ../shared/data/lbann)")
    parser.add_argument("--part", action="append", choices=PARTS, help="what to write (default: all)")
    args = parser.parse_args(argv)
    parts = args.part or list(PARTS)
    rows: list[dict] = []
    if "v099" in parts:
        rows += write_v099(args.git_dir, args.out)
    if {"unit_tests", "models"} & set(parts):
        with tempfile.TemporaryDirectory() as tmp:
            config = unpack(args.git_dir, Path(tmp))
            if "unit_tests" in parts:
                rows += write_unit_tests(args.git_dir, args.out, Path(tmp), config)
            if "models" in parts:
                rows += write_models(args.out, Path(tmp), config)
    write_readme(args.out, rows, parts)
    print(f"{len(rows)} files written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
