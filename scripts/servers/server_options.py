"""The options every model server here takes (oip_server.py: KServe's; triton_server.py: Triton's),
so that the tests start either the same way (tests/common/oip_server.h) and a user runs them
alike. Plain argparse: it imports under either server's virtualenv."""
import argparse
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def server_parser(description):
    """A parser with the shared options: where it listens, which models, how each inference runs."""
    p = argparse.ArgumentParser(description=description, allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address both servers bind (default: loopback)")
    p.add_argument("--grpc-port", type=int, default=0, help="0: a free port, printed on the ready line")
    p.add_argument("--http-port", type=int, default=0, help="0: a free port, printed on the ready line")
    p.add_argument("--models", default=str(ROOT / "models"), help="folder of the .onnx files")
    p.add_argument("--segmentation-name", default="segmentation-3.0")
    p.add_argument("--voice-name", default="voice-encoder-ge2e")
    p.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads (0: per core)")
    p.add_argument("--delay-ms", type=float, default=0.0, help="wait added to every inference")
    return p


def check(p, a):
    """Refuses shared options out of range, naming them."""
    if a.threads < 0 or a.delay_ms < 0:
        p.error("--threads >= 0, --delay-ms >= 0")
