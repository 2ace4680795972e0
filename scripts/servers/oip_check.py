#!/usr/bin/env python3
"""End-to-end check of an Open Inference Protocol (KServe v2) server for the project's networks: by
default it starts scripts/servers/oip_server.py on free loopback ports, checks it, stops it with
SIGTERM and checks that it exits with status 0.

  .venv/bin/python3 scripts/servers/oip_check.py [--wav ../shared/data/pyannote-debug/sample.wav]
      [--batches 1 8 64] [--server-arg=--threads=2 ...]
  .venv/bin/python3 scripts/servers/oip_check.py --grpc HOST:PORT [--http HOST:PORT]
      # a running server (e.g. Triton)

Over gRPC, with the protocol's generated stubs that KServe ships (kserve.protocol.grpc):
ServerLive, ServerReady, ModelReady and ModelMetadata (names, FP32, shapes) of both models;
ModelInfer with `raw_input_contents` (what a C++ client sends) on 10 s windows of the recording
(batches of --batches windows spread over it) and on random 160-frame mel partials (and one batch
of 100-frame partials), each compared with ONNX Runtime run here on the same tensors (max |diff|
printed), and that the answer came in `raw_output_contents`; one request with typed `contents`
(fp32_contents); refusals: a window of the wrong length (INVALID_ARGUMENT) and an unknown model
(NOT_FOUND). Over HTTP (when there is one): /v2/health/live, /v2/health/ready, the models' ready
and metadata, a JSON inference (voice) and a binary-data-extension inference (segmentation),
compared the same way. Ends with "oip_check: N passed, N failed"; exit status 1 on a failure.
"""
import argparse
import json
import pathlib
import sys
import time
import urllib.error
import urllib.request
import wave

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEG, VOICE = "segmentation-3.0", "voice-encoder-ge2e"
EXPECTED = {
    SEG: ({"input": [-1, 1, 160000]}, {"output": [-1, -1, 7]}),
    VOICE: ({"mel": [-1, -1, 40]}, {"embedding": [-1, 256]}),
}
WINDOW, RATE = 160000, 16000


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--grpc",
                   help="HOST:PORT of a running server "
                        "(default: start scripts/servers/oip_server.py)")
    p.add_argument("--http", help="HOST:PORT of its HTTP endpoint (with --grpc; optional)")
    p.add_argument("--server-arg", action="append", default=[], help="passed to oip_server.py")
    p.add_argument("--models", default=str(ROOT / "models"), help="the .onnx files for the reference")
    p.add_argument("--wav", default=str(ROOT.parent / "shared/data/pyannote-debug/sample.wav"))
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64], help="windows per request")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the ready line")
    p.add_argument("--tolerance", type=float, default=1e-4,
                   help="max |diff| allowed (the same ONNX Runtime on the CPU gives 0; a GPU more)")
    return p.parse_args()


ARGS = parse_args()
sys.argv = sys.argv[:1]  # KServe parses sys.argv when imported

import grpc  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb  # noqa: E402
from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc as pb_grpc  # noqa: E402

import oip_process  # noqa: E402

RESULTS = []


def check(ok, what):
    RESULTS.append(bool(ok))
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    return ok


def read_windows(path, count):
    with wave.open(path) as w:
        if (w.getnchannels(), w.getsampwidth(), w.getframerate()) != (1, 2, RATE):
            raise SystemExit(f"{path}: 16 kHz 16-bit mono expected")
        audio = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0
    if len(audio) < WINDOW:
        audio = np.pad(audio, (0, WINDOW - len(audio)))
    starts = np.linspace(0, len(audio) - WINDOW, count).astype(int) if count > 1 else [0]
    return np.stack([audio[s:s + WINDOW] for s in starts])[:, None, :]


class Reference:
    def __init__(self, folder):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.sessions = {name: ort.InferenceSession(str(pathlib.Path(folder) / f"{name}.onnx"), options,
                                                    providers=["CPUExecutionProvider"])
                         for name in (SEG, VOICE)}

    def run(self, model, name, array):
        return self.sessions[model].run(None, {name: array})[0]


def raw_request(model, name, array):
    return pb.ModelInferRequest(
        model_name=model, id=f"{model}-{len(array)}",
        inputs=[pb.ModelInferRequest.InferInputTensor(name=name, datatype="FP32", shape=list(array.shape))],
        raw_input_contents=[np.ascontiguousarray(array, "<f4").tobytes()])


def decode(response, name):
    """The output NAME of a ModelInferResponse, from raw_output_contents or typed contents, and
    which of the two it came in."""
    for i, out in enumerate(response.outputs):
        if out.name != name:
            continue
        if out.datatype != "FP32":
            raise ValueError(f"{name} is {out.datatype}")
        if len(response.raw_output_contents):
            return np.frombuffer(response.raw_output_contents[i], "<f4").reshape(out.shape), "raw"
        return np.array(out.contents.fp32_contents, np.float32).reshape(out.shape), "contents"
    raise ValueError(f"no output {name}")


def check_grpc(target, ref, windows_by_batch, partials, partials_short):
    limit = 2**31 - 1
    channel = grpc.insecure_channel(target, options=[("grpc.max_send_message_length", limit),
                                                     ("grpc.max_receive_message_length", limit)])
    stub = pb_grpc.GRPCInferenceServiceStub(channel)
    check(stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live, "grpc ServerLive: live")
    check(stub.ServerReady(pb.ServerReadyRequest(), timeout=10).ready, "grpc ServerReady: ready")
    for model, (inputs, outputs) in EXPECTED.items():
        check(stub.ModelReady(pb.ModelReadyRequest(name=model), timeout=10).ready, f"grpc ModelReady {model}")
        meta = stub.ModelMetadata(pb.ModelMetadataRequest(name=model), timeout=10)
        got = ({t.name: [t.datatype, list(t.shape)] for t in meta.inputs},
               {t.name: [t.datatype, list(t.shape)] for t in meta.outputs})
        want = ({n: ["FP32", d] for n, d in inputs.items()}, {n: ["FP32", d] for n, d in outputs.items()})
        check(got == want, f"grpc ModelMetadata {model}: platform '{meta.platform}' inputs {got[0]} outputs {got[1]}")

    def infer(model, in_name, out_name, array, what):
        t = time.monotonic()
        response = stub.ModelInfer(raw_request(model, in_name, array), timeout=300)
        seconds = time.monotonic() - t
        got, how = decode(response, out_name)
        want = ref.run(model, in_name, array)
        diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
        check(how == "raw" and got.shape == want.shape and diff <= ARGS.tolerance,
              f"grpc ModelInfer {model} {what}: {array.nbytes} bytes in raw_input_contents, answer in "
              f"{how}{'_output_contents' if how == 'raw' else ''} {list(got.shape)}, {seconds:.2f} s, "
              f"max |diff| vs onnxruntime {diff:.3g}")

    for batch, windows in windows_by_batch.items():
        infer(SEG, "input", "output", windows, f"{batch} window(s) of the recording")
    infer(VOICE, "mel", "embedding", partials, f"{len(partials)} random 160-frame mel partials")
    infer(VOICE, "mel", "embedding", partials_short, f"{len(partials_short)} random 100-frame mel partials")

    typed = pb.ModelInferRequest(model_name=VOICE, inputs=[pb.ModelInferRequest.InferInputTensor(
        name="mel", datatype="FP32", shape=list(partials[:2].shape),
        contents=pb.InferTensorContents(fp32_contents=partials[:2].ravel().tolist()))])
    got, how = decode(stub.ModelInfer(typed, timeout=60), "embedding")
    diff = float(np.max(np.abs(got - ref.run(VOICE, "mel", partials[:2]))))
    check(diff <= ARGS.tolerance, f"grpc ModelInfer {VOICE} with typed fp32_contents: answer in {how}, max |diff| {diff:.3g}")

    for request, code, what in (
            (raw_request(SEG, "input", windows_by_batch[min(windows_by_batch)][:, :, :16000]),
             grpc.StatusCode.INVALID_ARGUMENT, "a 1 s window"),
            (raw_request("no-such-model", "input", partials[:1]), grpc.StatusCode.NOT_FOUND, "an unknown model")):
        try:
            stub.ModelInfer(request, timeout=60)
            check(False, f"grpc ModelInfer with {what}: accepted")
        except grpc.RpcError as e:
            check(e.code() == code, f"grpc ModelInfer with {what}: {e.code().name} ({e.details()})")
    channel.close()


def http(target, path, body=None, headers=None):
    request = urllib.request.Request(f"http://{target}{path}", data=body, headers=headers or {},
                                     method="POST" if body is not None else "GET")
    with urllib.request.urlopen(request, timeout=120) as r:
        return r.status, dict(r.headers), r.read()


def check_http(target, ref, windows, partials):
    for path, key in (("/v2/health/live", "live"), ("/v2/health/ready", "ready"),
                      (f"/v2/models/{SEG}/ready", "ready"), (f"/v2/models/{VOICE}/ready", "ready")):
        status, _, body = http(target, path)
        check(status == 200 and json.loads(body or b"{}").get(key, True), f"http GET {path}: {status} {body[:60]!r}")
    for model, (inputs, _) in EXPECTED.items():
        meta = json.loads(http(target, f"/v2/models/{model}")[2])
        got = {t["name"]: list(t["shape"]) for t in meta["inputs"]}
        check(got == inputs, f"http GET /v2/models/{model}: inputs {got}")

    mel = partials[:2]
    body = json.dumps({"inputs": [{"name": "mel", "datatype": "FP32", "shape": list(mel.shape),
                                   "data": mel.ravel().tolist()}]}).encode()
    status, _, answer = http(target, f"/v2/models/{VOICE}/infer", body, {"Content-Type": "application/json"})
    out = json.loads(answer)["outputs"][0]
    got = np.array(out["data"], np.float32).reshape(out["shape"])
    diff = float(np.max(np.abs(got - ref.run(VOICE, "mel", mel))))
    check(status == 200 and diff <= ARGS.tolerance, f"http POST /v2/models/{VOICE}/infer JSON: max |diff| {diff:.3g}")

    # The binary data extension: JSON header, then the raw tensor; binary outputs asked for.
    header = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": list(windows.shape),
                                     "parameters": {"binary_data_size": windows.nbytes}}],
                         "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
    status, headers, answer = http(target, f"/v2/models/{SEG}/infer", header + windows.astype("<f4").tobytes(),
                                   {"Content-Type": "application/octet-stream",
                                    "Inference-Header-Content-Length": str(len(header))})
    length = int({k.lower(): v for k, v in headers.items()}.get("inference-header-content-length", len(answer)))
    out = json.loads(answer[:length])["outputs"][0]
    if length < len(answer):
        got, how = np.frombuffer(answer[length:], "<f4").reshape(out["shape"]), "binary"
    else:
        got, how = np.array(out["data"], np.float32).reshape(out["shape"]), "JSON"
    diff = float(np.max(np.abs(got - ref.run(SEG, "input", windows))))
    check(status == 200 and diff <= ARGS.tolerance,
          f"http POST /v2/models/{SEG}/infer binary extension, {len(windows)} windows: answer in {how}, "
          f"max |diff| {diff:.3g}")


def run_checks(grpc_target, http_target):
    try:
        ref = Reference(ARGS.models)
        windows = {b: read_windows(ARGS.wav, b) for b in ARGS.batches}
        rng = np.random.default_rng(29)
        partials = rng.random((16, 160, 40), dtype=np.float32)
        partials_short = rng.random((3, 100, 40), dtype=np.float32)
        check_grpc(grpc_target, ref, windows, partials, partials_short)
        if http_target:
            check_http(http_target, ref, read_windows(ARGS.wav, 4), partials)
    except (grpc.RpcError, urllib.error.URLError, OSError, ValueError, KeyError) as e:
        check(False, f"{type(e).__name__}: {e}")


def main():
    if ARGS.grpc:
        run_checks(ARGS.grpc, ARGS.http)
    else:
        server = oip_process.Server(sys.executable, ARGS.server_arg, ARGS.timeout)
        with server:
            print(f"oip_check: ready grpc={server.grpc} http={server.http} "
                  f"({server.started_in:.1f} s after start)", flush=True)
            run_checks(server.grpc, server.http)
            t = time.monotonic()
        check(server.exit_status == 0,
              f"SIGTERM: server exited with status {server.exit_status} in {time.monotonic() - t:.1f} s")
    failed = RESULTS.count(False)
    print(f"oip_check: {len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
