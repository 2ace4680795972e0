#!/usr/bin/env python3
"""An Open Inference Protocol (KServe v2) server for the project's two networks, for tests and
benchmarks of the element's remote engine (issue 29).

  .venv/bin/python3 scripts/servers/oip_server.py [--host 127.0.0.1] [--grpc-port 0] [--http-port 0]
      [--models models/] [--threads 1] [--instances 1] [--delay-ms 0] [--max-batch 0]
      [--max-message-bytes 2147483647] [--no-metadata] [--verbose]

It is KServe's Python model server (PyPI `kserve`, pinned in requirements-tools.txt): its gRPC
servicer (`inference.GRPCInferenceService`: ServerLive, ServerReady, ServerMetadata, ModelReady,
ModelMetadata, ModelInfer) and its REST server (/v2/health/live, /v2/health/ready,
/v2/models/NAME[/ready|/infer], JSON and the binary-data extension), with one `kserve.Model` per
network whose `predict` runs ONNX Runtime (CPU) on the decoded request. Nothing of the protocol is
written here; what is, is the binding to HOST (KServe binds every interface) and to ports that may be
0 (the kernel picks free ones), and the clean stop on SIGTERM/SIGINT.

Models (tensor names as in the ONNX files, FP32, first dimension the batch, any size from 1):
  segmentation-3.0    input  [-1, 1, 160000]  ->  output     [-1, -1, 7]  (log-probabilities;
                                                                       589 frames per window)
  voice-encoder-ge2e  mel    [-1, -1, 40]     ->  embedding  [-1, 256]
the same names and shapes as Triton reports for deploy/triton (ModelMetadata).

Once both models are loaded and both servers listen it prints one line on stdout:
  ready grpc=127.0.0.1:PORT http=127.0.0.1:PORT
(everything else goes to stderr). SIGTERM or SIGINT stops it: requests in flight are given
--grace seconds, then it exits with status 0.

gRPC answers always carry the outputs in `raw_output_contents` (little-endian, row-major), whether
the request sent `raw_input_contents` or typed `contents` (as Triton does). REST answers JSON
`data` unless the request asks for binary outputs (parameters.binary_data_output or an output's
binary_data). A request whose inputs do not fit the model (name, datatype, shape, byte count,
batch over --max-batch) is refused with INVALID_ARGUMENT (gRPC) / 400 (REST).

--threads: ONNX Runtime intra-op threads per inference (0: one per core). --instances: inferences
one model runs at once (like a Triton instance_group count); more requests wait. --delay-ms: every
inference first waits this long (without using a core), to emulate a slow or distant server.
--max-batch: refuse requests with a larger batch (0: no limit), to test clients against a server
whose max_batch_size is smaller than their batches. --max-message-bytes: gRPC's send and receive
limits (default INT32_MAX, as Triton; KServe's own default, 8 MiB, is less than 4 windows).
--no-metadata: serve the models as a KServe custom predictor does by default (get_input_types and
get_output_types not overridden): ModelMetadata lists no inputs and no outputs; requests are still
checked against the tensors above and refused (INVALID_ARGUMENT) where they do not fit.
"""
import os
import pathlib
import sys

import server_options

# name: (file, {input: dims}, {output: dims}); -1 is any size, the first dimension is the batch.
MODELS = {
    # Output frames: -1 as in the ONNX file (589 for 160000 samples), which Triton's ONNX Runtime
    # backend requires of an output's dims (they must equal the file's exactly), so reports too.
    "segmentation-3.0": ("segmentation-3.0.onnx", {"input": [-1, 1, 160000]}, {"output": [-1, -1, 7]}),
    "voice-encoder-ge2e": ("voice-encoder-ge2e.onnx", {"mel": [-1, -1, 40]}, {"embedding": [-1, 256]}),
}


def parse_args(argv):
    p = server_options.server_parser(__doc__.split("\n\n")[0])
    p.add_argument("--instances", type=int, default=1, help="inferences one model runs at once")
    p.add_argument("--max-batch", type=int, default=0, help="refuse larger batches (0: no limit)")
    p.add_argument("--max-message-bytes", type=int, default=2**31 - 1, help="gRPC send/receive limit")
    p.add_argument("--no-metadata", action="store_true",
                   help="declare no tensors in ModelMetadata, as KServe's custom predictors by default")
    p.add_argument("--grace", type=float, default=5.0, help="seconds given to requests in flight at stop")
    p.add_argument("--verbose", action="store_true", help="KServe's and uvicorn's INFO logs (stderr)")
    a = p.parse_args(argv)
    server_options.check(p, a)
    if a.instances < 1 or a.max_batch < 0:
        p.error("--instances >= 1, --max-batch >= 0")
    return a


ARGS = parse_args(sys.argv[1:])
# KServe parses sys.argv when imported (its own --http_port etc.); give it nothing to misread.
sys.argv = sys.argv[:1]
os.environ.setdefault("KSERVE_LOGLEVEL", "INFO" if ARGS.verbose else "WARNING")

import asyncio  # noqa: E402
import concurrent.futures  # noqa: E402
import copy  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import uuid  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from grpc import aio  # noqa: E402

import kserve  # noqa: E402
import kserve.logging  # noqa: E402
from kserve.constants.constants import FASTAPI_APP_IMPORT_STRING  # noqa: E402
from kserve.errors import InferenceError, InvalidInput  # noqa: E402
from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc  # noqa: E402
from kserve.protocol.grpc.interceptors import ExceptionToStatusInterceptor, LoggingInterceptor  # noqa: E402
from kserve.protocol.grpc.server import GRPCServer  # noqa: E402
from kserve.protocol.grpc.servicer import InferenceServicer  # noqa: E402
from kserve.protocol.infer_type import InferOutput, InferRequest, InferResponse  # noqa: E402
from kserve.protocol.rest.server import RESTServer  # noqa: E402


# kserve 0.21 answers with FastAPI's ORJSONResponse, which FastAPI now calls deprecated, on each request.
warnings.filterwarnings("ignore", message="ORJSONResponse is deprecated")


def configure_logging(verbose):
    """KServe's logging configuration with every handler on stderr (uvicorn's access log goes to
    stdout there), so that stdout carries the ready line only."""
    config = copy.deepcopy(kserve.logging.KSERVE_LOG_CONFIG)
    for handler in config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"
    level = "INFO" if verbose else "WARNING"
    for logger in config["loggers"].values():
        logger["level"] = level
    kserve.logging.configure_logging(config)


class OnnxModel(kserve.Model):
    """One ONNX network behind the v2 protocol: validates the decoded request against the declared
    tensors, runs ONNX Runtime in a thread of its own (the event loop keeps serving), answers the
    FP32 outputs as little-endian bytes (raw_output_contents on gRPC)."""

    def __init__(self, name, path, inputs, outputs, args):
        super().__init__(name)
        self.path, self.inputs, self.outputs, self.args = path, inputs, outputs, args
        self.session = None
        self.pool = concurrent.futures.ThreadPoolExecutor(args.instances, thread_name_prefix=name)

    def load(self):
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.args.threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        # The declared tensors must be the file's: names, FP32, and every fixed size of the file.
        for declared, actual in ((self.inputs, self.session.get_inputs()),
                                 (self.outputs, self.session.get_outputs())):
            if sorted(declared) != sorted(t.name for t in actual):
                raise RuntimeError(f"{self.path}: tensors {[t.name for t in actual]}, expected {sorted(declared)}")
            for t in actual:
                dims = declared[t.name]
                fixed = [d if isinstance(d, int) else -1 for d in t.shape]
                if t.type != "tensor(float)" or len(fixed) != len(dims) or any(
                        f >= 0 and f != d for f, d in zip(fixed, dims)):
                    raise RuntimeError(f"{self.path}: {t.name} is {t.type} {t.shape}, expected FP32 {dims}")
        self.ready = True
        return self.ready

    def stop(self):
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.ready = False

    def get_input_types(self):
        return [{"name": n, "datatype": "FP32", "shape": d} for n, d in self.inputs.items()]

    def get_output_types(self):
        return [{"name": n, "datatype": "FP32", "shape": d} for n, d in self.outputs.items()]

    def _feeds(self, request):
        if not isinstance(request, InferRequest):
            raise InvalidInput(f"model '{self.name}' speaks the v2 protocol only")
        feeds, batch = {}, None
        for tensor in request.inputs:
            dims = self.inputs.get(tensor.name)
            if dims is None:
                raise InvalidInput(f"unexpected input '{tensor.name}' for model '{self.name}'")
            if tensor.name in feeds:
                raise InvalidInput(f"input '{tensor.name}' given twice")
            if tensor.datatype != "FP32":
                raise InvalidInput(f"input '{tensor.name}' is {tensor.datatype}, expected FP32")
            shape = list(tensor.shape)
            if len(shape) != len(dims) or any(s < 0 or (d >= 0 and s != d) for s, d in zip(shape, dims)):
                raise InvalidInput(f"input '{tensor.name}' has shape {shape}, expected {dims}")
            if min(shape) < 1:
                raise InvalidInput(f"input '{tensor.name}' has shape {shape}: every dimension must be >= 1")
            if batch is not None and shape[0] != batch:
                raise InvalidInput("inputs disagree on the batch size")
            batch = shape[0]
            if self.args.max_batch and batch > self.args.max_batch:
                raise InvalidInput(f"batch {batch} over the max batch size {self.args.max_batch} "
                                   f"of model '{self.name}'")
            try:
                array = tensor.as_numpy()
            except ValueError as e:  # raw bytes or data of another size than the shape says
                raise InvalidInput(f"input '{tensor.name}': {e}") from None
            feeds[tensor.name] = np.ascontiguousarray(array, dtype="<f4")
        missing = sorted(set(self.inputs) - set(feeds))
        if missing:
            raise InvalidInput(f"missing input(s) {missing} for model '{self.name}'")
        for wanted in request.request_outputs or []:
            if wanted.name not in self.outputs:
                raise InvalidInput(f"unexpected output '{wanted.name}' requested from model '{self.name}'")
        return feeds

    async def predict(self, payload, headers=None):
        feeds = self._feeds(payload)
        if self.args.delay_ms:
            await asyncio.sleep(self.args.delay_ms / 1000.0)
        names = list(self.outputs)
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(self.pool, self.session.run, names, feeds)
        except Exception as e:  # ONNX Runtime's own refusal of what passed the checks
            raise InferenceError(f"model '{self.name}': {e}") from None
        outputs = []
        for n, r in zip(names, results):
            out = InferOutput(name=n, shape=list(r.shape), datatype="FP32")
            # As bytes, not as `data=array`: kserve 0.21's InferResponse.to_grpc() tests an array's
            # truth value when the request came in raw_input_contents (ValueError, INTERNAL). The
            # REST answer turns these bytes into JSON `data` unless binary outputs were asked for.
            out.set_data_from_numpy(np.ascontiguousarray(r, dtype="<f4"), binary_data=True)
            outputs.append(out)
        # The request's id echoed; a JSON request without one gets a fresh one (REST's answer needs one).
        response_id = payload.id if payload.id is not None else str(uuid.uuid4())
        return InferResponse(response_id=response_id, model_name=self.name, infer_outputs=outputs,
                             use_binary_outputs=payload.use_binary_outputs,
                             requested_outputs=payload.request_outputs)


class UndeclaredOnnxModel(OnnxModel):
    """The same model with KServe's own get_input_types/get_output_types, which declare nothing: what a
    custom predictor that does not override them serves (--no-metadata)."""

    get_input_types = kserve.Model.get_input_types
    get_output_types = kserve.Model.get_output_types


class BoundGRPCServer(GRPCServer):
    """KServe's gRPC server (its servicer and error interceptor) on HOST:PORT instead of [::]:PORT,
    reporting the port it got (PORT may be 0)."""

    def __init__(self, host, port, *a, **kw):
        super().__init__(port, *a, **kw)
        self.host, self.bound_port, self.started = host, None, asyncio.Event()

    async def start(self, max_workers):
        self._server = aio.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=max_workers),
            interceptors=(LoggingInterceptor(), ExceptionToStatusInterceptor()),
            options=[("grpc.max_send_message_length", self._kwargs["grpc_max_send_message_length"]),
                     ("grpc.max_receive_message_length", self._kwargs["grpc_max_receive_message_length"]),
                     # gRPC's default SO_REUSEPORT would let two servers share a port silently.
                     ("grpc.so_reuseport", 0)])
        grpc_predict_v2_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(
            InferenceServicer(self._data_plane, self._model_repository_extension), self._server)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.bound_port = self._server.add_insecure_port(f"{host}:{self._port}")
        if not self.bound_port:
            raise OSError(f"gRPC: cannot listen on {host}:{self._port}")
        await self._server.start()
        self.started.set()
        await self._server.wait_for_termination()


def listening_socket(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


async def serve(args):
    models = []
    for name, key in ((args.segmentation_name, "segmentation-3.0"), (args.voice_name, "voice-encoder-ge2e")):
        filename, inputs, outputs = MODELS[key]
        kind = UndeclaredOnnxModel if args.no_metadata else OnnxModel
        model = kind(name, pathlib.Path(args.models) / filename, inputs, outputs, args)
        try:
            model.load()
        except Exception as e:  # a missing or different file
            raise RuntimeError(f"cannot serve {model.path}: {e}") from None
        models.append(model)

    server = kserve.ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, workers=1,
                                enable_grpc=False, enable_latency_logging=False,
                                grace_period=int(max(1, args.grace)))
    for model in models:
        server.register_model(model)

    http_sock = listening_socket(args.host, args.http_port)
    http_port = http_sock.getsockname()[1]
    rest = RESTServer(FASTAPI_APP_IMPORT_STRING, server.dataplane, server.model_repository_extension,
                      http_port, workers=1, grace_period=int(max(1, args.grace)))
    rest.config.host = args.host
    rest.create_application()
    uvicorn_server = rest._server  # kserve 0.21: the uvicorn.Server behind RESTServer.start()

    grpc_server = BoundGRPCServer(args.host, args.grpc_port, server.dataplane, server.model_repository_extension,
                                  kwargs={"grpc_max_send_message_length": args.max_message_bytes,
                                          "grpc_max_receive_message_length": args.max_message_bytes},
                                  grace_period=args.grace)

    tasks = [asyncio.ensure_future(uvicorn_server.serve(sockets=[http_sock])),
             asyncio.ensure_future(grpc_server.start(max_workers=4))]
    started = asyncio.ensure_future(grpc_server.started.wait())
    while not (uvicorn_server.started and started.done()):
        done = [t for t in tasks if t.done()]
        if done:  # a server failed to start (uvicorn exits on a port it cannot bind)
            started.cancel()
            uvicorn_server.should_exit = True
            await grpc_server.stop()
            await asyncio.gather(*tasks, return_exceptions=True)
            for t in done:
                if t.exception():
                    raise RuntimeError(f"a server failed to start: {t.exception()}")
            raise RuntimeError("a server stopped while starting")
        await asyncio.sleep(0.02)

    stopping = asyncio.Event()

    def on_signal(sig):
        print(f"oip_server: {signal.Signals(sig).name}, stopping", file=sys.stderr, flush=True)
        stopping.set()

    # After uvicorn.Server.serve() has installed its own handlers (signal.signal), so ours win.
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)

    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"ready grpc={host}:{grpc_server.bound_port} http={host}:{http_port}", flush=True)

    waiter = asyncio.ensure_future(stopping.wait())
    await asyncio.wait(tasks + [waiter], return_when=asyncio.FIRST_COMPLETED)
    failed = not stopping.is_set()
    uvicorn_server.should_exit = True
    await grpc_server.stop()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    waiter.cancel()
    for model in models:
        model.stop()
    errors = [r for r in results if isinstance(r, BaseException)]
    for e in errors:
        print(f"oip_server: {type(e).__name__}: {e}", file=sys.stderr)
    return 1 if failed or errors else 0


def main():
    configure_logging(ARGS.verbose)
    try:
        return asyncio.run(serve(ARGS))
    except (OSError, RuntimeError) as e:
        print(f"oip_server: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
