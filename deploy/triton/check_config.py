#!/usr/bin/env python3
"""Checks deploy/triton's config.pbtxt files without Triton: each is parsed as Triton's ModelConfig
protobuf text (unknown fields and bad values are errors), then held to what Triton's ONNX Runtime
backend checks when it loads a model against the ONNX file (models/NAME.onnx):

- the config's name is its folder's, the platform "onnxruntime_onnx", max_batch_size > 0, and
  the file's first dimension of every input and output is a variable one (the batch);
- input and output names and FP32 types are the file's;
- an input's [-1] + dims has the file's rank, and each fixed dimension of the file is equal
  (the config may fix what the file leaves variable);
- an output's [-1] + dims equals the file's shape exactly (variable dimensions as -1), which is
  the backend's rule for outputs (onnxruntime_backend, CompareDimsSupported with compare_exact);
- dynamic batching is on with preferred sizes (if any) within max_batch_size, and every instance
  group is KIND_GPU.

  .venv/bin/python3 deploy/triton/check_config.py [--proto model_config.proto] [--models models/]

The ModelConfig message comes from --proto (Triton's protobuf/model_config.proto from its
`common` repository, compiled here with grpc_tools, which requirements-tools.txt brings with
kserve) or else from the tritonclient package (tritonclient/grpc/model_config_pb2.py, e.g.
`pip install --no-deps --target /tmp/tc tritonclient==2.73.0` and PYTHONPATH=/tmp/tc). Without
either it says so and checks nothing (exit status 2).
"""
import argparse
import importlib
import importlib.util
import pathlib
import subprocess
import sys
import tempfile

import onnx
from google.protobuf import text_format

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def model_config_class(proto):
    if proto:
        out = pathlib.Path(tempfile.mkdtemp(prefix="model_config_"))
        proto = pathlib.Path(proto).resolve()
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{proto.parent}", f"--python_out={out}",
                        proto.name], check=True)
        sys.path.insert(0, str(out))
        return importlib.import_module(proto.stem + "_pb2").ModelConfig, f"{proto} (compiled with grpc_tools)"
    # The file alone: tritonclient.grpc's __init__ wants the client's dependencies too.
    spec = importlib.util.find_spec("tritonclient")
    path = spec and pathlib.Path(spec.submodule_search_locations[0]) / "grpc" / "model_config_pb2.py"
    if not path or not path.is_file():
        return None, None
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location("model_config_pb2", path))
    module.__spec__.loader.exec_module(module)
    return module.ModelConfig, f"tritonclient's {path}"


def onnx_tensors(path):
    """{name: (elem_type, shape with -1 for variable dims)} for the inputs and the outputs."""
    graph = onnx.load(str(path), load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}

    def table(values):
        return {v.name: (v.type.tensor_type.elem_type,
                         [d.dim_value if d.HasField("dim_value") else -1 for d in v.type.tensor_type.shape.dim])
                for v in values if v.name not in initializers}
    return table(graph.input), table(graph.output)


def check(config_path, model_config, models):
    errors = []
    config = text_format.Parse(config_path.read_text(), model_config())  # raises on any error
    folder = config_path.parent.name
    if config.name != folder:
        errors.append(f"name '{config.name}' is not the folder's ('{folder}')")
    if config.platform != "onnxruntime_onnx":
        errors.append(f"platform '{config.platform}'")
    if config.max_batch_size <= 0:
        errors.append("max_batch_size must be > 0 (the networks batch on their first dimension)")
    onnx_path = models / f"{folder}.onnx"
    inputs, outputs = onnx_tensors(onnx_path)
    fp32 = model_config.DESCRIPTOR.fields_by_name["input"].message_type.fields_by_name[
        "data_type"].enum_type.values_by_name["TYPE_FP32"].number
    for kind, declared, actual, exact in (("input", config.input, inputs, False),
                                          ("output", config.output, outputs, True)):
        if sorted(t.name for t in declared) != sorted(actual):
            errors.append(f"{kind}s {[t.name for t in declared]}, the file has {sorted(actual)}")
            continue
        for t in declared:
            elem_type, shape = actual[t.name]
            full = [-1] + list(t.dims)
            if t.data_type != fp32 or elem_type != onnx.TensorProto.FLOAT:
                errors.append(f"{kind} '{t.name}' is not FP32 in both")
            if not shape or shape[0] != -1:
                errors.append(f"{kind} '{t.name}': the file's first dimension is not variable: {shape}")
            ok = len(shape) == len(full) and all(m == c for m, c in zip(shape, full) if exact or m != -1)
            if not ok:
                errors.append(f"{kind} '{t.name}': config shape {full} vs the file's {shape}"
                              f"{' (outputs must match exactly)' if exact else ''}")
            print(f"  {kind} {t.name}: config {full}, file {shape}")
    if not config.HasField("dynamic_batching"):
        errors.append("no dynamic_batching")
    elif any(not 0 < b <= config.max_batch_size for b in config.dynamic_batching.preferred_batch_size):
        errors.append("a preferred_batch_size outside 1..max_batch_size")
    gpu = model_config.DESCRIPTOR.fields_by_name["instance_group"].message_type.enum_types_by_name[
        "Kind"].values_by_name["KIND_GPU"].number
    if not config.instance_group or any(g.kind != gpu or g.count < 1 for g in config.instance_group):
        errors.append("instance_group: KIND_GPU groups of count >= 1 expected")
    print(f"  max_batch_size {config.max_batch_size}, preferred_batch_size "
          f"{list(config.dynamic_batching.preferred_batch_size)}, max_queue_delay_microseconds "
          f"{config.dynamic_batching.max_queue_delay_microseconds}, instance_group "
          f"{[(g.count, model_config.DESCRIPTOR.fields_by_name['instance_group'].message_type.enum_types_by_name['Kind'].values_by_number[g.kind].name) for g in config.instance_group]}")
    return errors


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--proto", help="Triton's model_config.proto")
    p.add_argument("--models", default=str(ROOT / "models"), help="folder of the .onnx files")
    a = p.parse_args()
    model_config, source = model_config_class(a.proto)
    if model_config is None:
        print("check_config: no ModelConfig message (neither --proto nor tritonclient): nothing checked")
        return 2
    print(f"check_config: ModelConfig from {source}")
    failed = 0
    for path in sorted(HERE.glob("*/config.pbtxt")):
        print(f"{path.relative_to(ROOT)}:")
        try:
            errors = check(path, model_config, pathlib.Path(a.models))
        except (text_format.ParseError, OSError, onnx.onnx_cpp2py_export.checker.ValidationError) as e:
            errors = [f"{type(e).__name__}: {e}"]
        for e in errors:
            print(f"  ERROR {e}")
        print(f"  {'ok' if not errors else 'FAILED'}")
        failed += bool(errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
