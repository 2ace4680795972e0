#!/usr/bin/env python3
"""NVIDIA Triton Inference Server itself serving the project's two networks, for tests of the
element's remote engine against Triton (issue 38 §2), beside KServe's
(scripts/servers/oip_server.py).

  .venv-triton/bin/python3 scripts/servers/triton_server.py [--host 127.0.0.1] [--grpc-port 0]
      [--http-port 0] [--models models/] [--threads 1] [--delay-ms 0] [--max-batch 64]
      [--queue-delay-us 2000] [--verbose]

The server is the `tritonserver` binary of NVIDIA's PyTriton wheel (PyPI `nvidia-pytriton`,
pinned in requirements-triton.txt with its own virtualenv, .venv-triton: it needs numpy < 2,
the project's tooling takes numpy 2): Triton's own gRPC and HTTP front ends, model repository,
dynamic batcher and Python backend. PyTriton binds each network as a Triton model whose Python
backend hands the (dynamically batched) requests to a function here that runs ONNX Runtime on
them. What is under test is our client against Triton's server: its ModelMetadata, its batching,
its errors.

Models (FP32, the batch dimension Triton's own, max_batch_size --max-batch, dynamic batching on
with --queue-delay-us):
  segmentation-3.0    input  [-1, 1, 160000] ->  output  [-1, -1, 7]  (10 s windows, as
                                                                  deploy/triton's model)
  voice-encoder-ge2e  mel    [-1, -1, 40]   ->  embedding [-1, 256]

Once both models are ready it prints one line on stdout, as scripts/servers/oip_server.py does:
  ready grpc=127.0.0.1:PORT http=127.0.0.1:PORT
Triton's log goes to stderr with --verbose, else to a temporary file removed at exit. Ports 0:
free ones, found by binding port 0 first (Triton itself needs a number). --host: the address its
gRPC, HTTP and metrics endpoints bind. SIGTERM or SIGINT stops it (exit status 0).

--delay-ms: every inference first waits this long, to emulate a slow server. --max-batch: the
models' max_batch_size; Triton refuses a larger request with INVALID_ARGUMENT.
"""
import logging
import pathlib
import signal
import socket
import sys
import tempfile
import threading
import time

import numpy as np
import onnxruntime as ort
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

import server_options


def parse_args(argv):
    p = server_options.server_parser(__doc__.split("\n\n")[0])
    p.add_argument("--max-batch", type=int, default=64, help="each model's max_batch_size")
    p.add_argument("--queue-delay-us", type=int, default=2000,
                   help="the dynamic batcher's max_queue_delay_microseconds")
    p.add_argument("--verbose", action="store_true", help="Triton's log on stderr")
    a = p.parse_args(argv)
    server_options.check(p, a)
    if a.max_batch < 1 or a.queue_delay_us < 0:
        p.error("--max-batch >= 1, --queue-delay-us >= 0")
    return a


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def onnx_function(path, input_name, output_name, threads, delay_ms):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    @batch
    def infer(**inputs):
        if delay_ms:
            time.sleep(delay_ms / 1000)
        x = np.ascontiguousarray(inputs[input_name], dtype=np.float32)
        return {output_name: session.run([output_name], {input_name: x})[0].astype(np.float32)}

    return infer


def main(argv):
    a = parse_args(argv)
    models = pathlib.Path(a.models)
    for f in ("segmentation-3.0.onnx", "voice-encoder-ge2e.onnx"):
        if not (models / f).is_file():
            sys.exit(f"triton_server: {models / f} is missing (scripts/setup.sh makes it)")
    grpc_port = a.grpc_port or free_port()
    http_port = a.http_port or free_port()
    if not a.verbose:
        logging.getLogger("pytriton").setLevel(logging.ERROR)
    logs = tempfile.TemporaryDirectory(prefix="triton-server-")
    config = TritonConfig(grpc_address=a.host, grpc_port=grpc_port, http_address=a.host,
                          http_port=http_port, metrics_address=a.host, metrics_port=free_port(),
                          log_verbose=0, exit_on_error=True,
                          log_file=None if a.verbose else pathlib.Path(logs.name) / "triton.log")
    batching = dict(batching=True, max_batch_size=a.max_batch,
                    batcher=DynamicBatcher(max_queue_delay_microseconds=a.queue_delay_us))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with Triton(config=config) as triton:
        triton.bind(model_name=a.segmentation_name,
                    infer_func=onnx_function(models / "segmentation-3.0.onnx", "input", "output",
                                             a.threads, a.delay_ms),
                    inputs=[Tensor(name="input", dtype=np.float32, shape=(1, 160000))],
                    outputs=[Tensor(name="output", dtype=np.float32, shape=(-1, 7))],
                    config=ModelConfig(**batching), strict=True)
        triton.bind(model_name=a.voice_name,
                    infer_func=onnx_function(models / "voice-encoder-ge2e.onnx", "mel", "embedding",
                                             a.threads, a.delay_ms),
                    inputs=[Tensor(name="mel", dtype=np.float32, shape=(-1, 40))],
                    outputs=[Tensor(name="embedding", dtype=np.float32, shape=(256,))],
                    config=ModelConfig(**batching), strict=True)
        triton.run()  # returns once Triton is up and both models are loaded
        print(f"ready grpc={a.host}:{grpc_port} http={a.host}:{http_port}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
