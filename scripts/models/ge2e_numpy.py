"""Resemblyzer 0.1.4's GE2E voice encoder in numpy: its weights read from pretrained.pt without torch,
and its forward pass.

Shared by scripts/models/convert_voice_model.py (which checks its ONNX export against forward()) and
tests/reference/make_voice_reference.py (whose embeddings are the engine's independent reference).
"""
import collections
import pickle

import numpy as np

HIDDEN = 256
MEL_BANDS = 40
LAYERS = 3

EXPECTED_SHAPES = {
    **{f"lstm.weight_ih_l{k}": (4 * HIDDEN, MEL_BANDS if k == 0 else HIDDEN) for k in range(LAYERS)},
    **{f"lstm.weight_hh_l{k}": (4 * HIDDEN, HIDDEN) for k in range(LAYERS)},
    **{f"lstm.bias_ih_l{k}": (4 * HIDDEN,) for k in range(LAYERS)},
    **{f"lstm.bias_hh_l{k}": (4 * HIDDEN,) for k in range(LAYERS)},
    "linear.weight": (HIDDEN, HIDDEN),
    "linear.bias": (HIDDEN,),
}

# torch.serialization's legacy (pre-zip) format: these two records open the file.
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


class _TensorRef:
    """A tensor named while unpickling; its storage's bytes follow the pickles, so it is
    materialised afterwards."""

    def __init__(self, storage_key, offset, size, stride):
        self.storage_key, self.offset, self.size, self.stride = storage_key, offset, tuple(size), tuple(stride)


def _rebuild_tensor_v2(storage_key, offset, size, stride, requires_grad=False, backward_hooks=None, *metadata):
    return _TensorRef(storage_key, offset, size, stride)


class _FloatStorage:
    """Stands for torch.FloatStorage, which only appears as the type field of persistent ids."""


class _Unpickler(pickle.Unpickler):
    """Resolves only the globals a float32 state dict needs; anything else is refused, so the file
    cannot run code."""

    _ALLOWED = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch", "FloatStorage"): _FloatStorage,
    }

    def __init__(self, f):
        super().__init__(f)
        self.storages = {}  # key -> element count, as named by the persistent ids

    def find_class(self, module, name):
        try:
            return self._ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"pretrained.pt: global {module}.{name} is not allowed") from None

    def persistent_load(self, pid):
        # ('storage', storage type, key, location, element count, view metadata)
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"pretrained.pt: unexpected persistent id {pid!r}")
        _, storage_type, key, _location, count, view = pid
        if storage_type is not _FloatStorage:
            raise pickle.UnpicklingError(f"pretrained.pt: storage {key} is not a FloatStorage")
        if view is not None:
            raise pickle.UnpicklingError(f"pretrained.pt: storage views are not supported ({key})")
        self.storages[key] = count
        return key


def load_pretrained(path):
    """The checkpoint's model_state as float32 numpy arrays, only the tensors of EXPECTED_SHAPES,
    each checked for its shape."""
    with open(path, "rb") as f:
        u = _Unpickler(f)
        if u.load() != _LEGACY_MAGIC:
            raise SystemExit(f"{path}: not a legacy PyTorch file (bad magic number)")
        if u.load() != _LEGACY_PROTOCOL:
            raise SystemExit(f"{path}: unsupported legacy protocol version")
        sys_info = u.load()
        if not sys_info.get("little_endian"):
            raise SystemExit(f"{path}: written big-endian")
        checkpoint = u.load()
        keys = u.load()
        if sorted(keys) != sorted(u.storages):
            raise SystemExit(f"{path}: storage list does not match the tensors")
        data = {}
        for key in keys:
            count = int(np.frombuffer(f.read(8), "<i8")[0])
            if count != u.storages[key]:
                raise SystemExit(f"{path}: storage {key} holds {count} elements, {u.storages[key]} expected")
            raw = f.read(4 * count)
            if len(raw) != 4 * count:
                raise SystemExit(f"{path}: truncated in storage {key}")
            data[key] = np.frombuffer(raw, "<f4")
        if f.read(1):
            raise SystemExit(f"{path}: trailing bytes after the storages")

    if not isinstance(checkpoint, dict) or "model_state" not in checkpoint:
        raise SystemExit(f"{path}: no model_state in the checkpoint")
    state = checkpoint["model_state"]
    weights = {}
    for name, shape in EXPECTED_SHAPES.items():
        t = state.get(name)
        if not isinstance(t, _TensorRef):
            raise SystemExit(f"{path}: tensor {name} missing from model_state")
        if t.size != shape:
            raise SystemExit(f"{path}: {name} has shape {list(t.size)}, expected {list(shape)}")
        contiguous = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
        if t.stride != contiguous:
            raise SystemExit(f"{path}: {name} is not contiguous (stride {list(t.stride)})")
        n = int(np.prod(shape))
        storage = data[t.storage_key]
        if t.offset + n > len(storage):
            raise SystemExit(f"{path}: {name} runs past the end of its storage")
        weights[name] = storage[t.offset:t.offset + n].reshape(shape).copy()
    return weights


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * x))  # never overflows, unlike 1 / (1 + exp(-x))


def forward(weights, mels):
    """Embeddings [batch, 256] of mel power spectrograms [batch, frames, 40], as Resemblyzer's
    VoiceEncoder.forward computes them: a 3-layer LSTM (PyTorch gate order i, f, g, o), then
    ReLU(linear(last hidden state of layer 3)), L2-normalised. Computed in float64."""
    x = np.asarray(mels, np.float64)
    batch, frames, _ = x.shape
    for k in range(LAYERS):
        w_ih = weights[f"lstm.weight_ih_l{k}"].astype(np.float64)
        w_hh = weights[f"lstm.weight_hh_l{k}"].astype(np.float64)
        b = weights[f"lstm.bias_ih_l{k}"].astype(np.float64) + weights[f"lstm.bias_hh_l{k}"]
        pre = x @ w_ih.T + b  # the input half of every step at once
        h = np.zeros((batch, HIDDEN))
        c = np.zeros((batch, HIDDEN))
        ys = np.empty((batch, frames, HIDDEN))
        for t in range(frames):
            gates = pre[:, t] + h @ w_hh.T
            i, f, g, o = np.split(gates, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
            ys[:, t] = h
        x = ys
    e = np.maximum(h @ weights["linear.weight"].T.astype(np.float64) + weights["linear.bias"], 0)
    return e / np.linalg.norm(e, axis=1, keepdims=True)
