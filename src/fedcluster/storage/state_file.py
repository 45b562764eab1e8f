"""State files that load without running code: safetensors for arrays, JSON for the rest, a SHA-256 inside.

A state is a nested structure of dicts, lists, tuples, scalars, strings, ``None``, torch tensors,
numpy arrays and dataclasses registered with :func:`persistable` (a checkpoint's algorithm state, a
cached federation). Tensors and arrays go into a safetensors file; the structure goes into its
metadata as JSON with every tensor replaced by a reference. The metadata also carries the file's
kind (``checkpoint``, ``federation``), an optional key (e.g. the federation cache key) and a SHA-256
of kind, key, structure and every tensor's bytes, which :func:`load_state` recomputes: a truncated,
bit-flipped or swapped file is refused, never used.

The checksum detects corruption and accidental swaps; it is not a signature (whoever can write the file
can recompute it). Safety from hostile files comes from the format: nothing in it is executable.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save as safetensors_bytes

from fedcluster.storage.atomic import atomic_write

FORMAT = "fedcluster-state"
VERSION = "1"
_PICKLE_MAGIC = (b"PK\x03\x04", b"\x80")  # torch.save zip archives and raw pickles
MAX_DEPTH = 64  # nesting a state file's structure may have (the writer's deepest states use about 10)
_ARRAY_KINDS = "biufc"  # numpy arrays the writer stores: bool, integers, floats, complex (safetensors dtypes)
_SCALAR_KINDS = "biufcUS"  # numpy scalars: those and text (np.str_, np.bytes_)


_CLASSES: dict[str, type] = {}  # the only classes a state file may name (see ``persistable``)


def persistable(cls: type) -> type:
    """Class decorator: let instances of dataclass ``cls`` be stored field by field in state files.
    Loading rebuilds only classes registered this way, by name; nothing else is ever looked up."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} must be a dataclass")
    _CLASSES[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


class StateFileError(Exception):
    """A state file is missing, corrupt, modified, of another kind or another key; ``reason`` says which."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path, self.reason = path, reason


# -- structure <-> JSON with tensor references ---------------------------------------------------
def _encode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"float": repr(obj)}
    if isinstance(obj, torch.Tensor):
        name = str(len(tensors))
        tensors[name] = _owned(obj.detach().cpu())
        return {"tensor": name}
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biufc":
            raise TypeError(f"cannot store a numpy array of dtype {obj.dtype}")
        name = str(len(tensors))
        native = obj.astype(obj.dtype.newbyteorder("="), copy=False)
        tensors[name] = torch.from_numpy(np.ascontiguousarray(native))
        return {"ndarray": name, "dtype": obj.dtype.str}
    if isinstance(obj, np.generic):
        return {"np": obj.dtype.str, "value": _encode(obj.item(), tensors)}
    if isinstance(obj, list):
        return [_encode(v, tensors) for v in obj]
    if isinstance(obj, tuple):
        return {"tuple": [_encode(v, tensors) for v in obj]}
    if isinstance(obj, dict):
        return {"dict": [[_encode(k, tensors), _encode(v, tensors)] for k, v in obj.items()]}
    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if _CLASSES.get(name) is type(obj):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return {"object": name, "fields": _encode(fields, tensors)}
    raise TypeError(f"cannot store a {type(obj).__name__} in a state file")


def _owned(t: torch.Tensor) -> torch.Tensor:
    """``t`` with its own compact storage (safetensors refuses views that share memory)."""
    compact = t.is_contiguous() and t.storage_offset() == 0 and \
        t.untyped_storage().nbytes() == t.numel() * t.element_size()
    return t if compact else t.contiguous().clone()


def _decode(node: Any, tensors: dict[str, torch.Tensor], depth: int = 0) -> Any:
    """The object of ``node``. Only what :func:`_encode` writes is accepted: arrays keep their tensor's dtype (so
    nothing is allocated beyond the file's own bytes), the nesting is at most ``MAX_DEPTH``."""
    if node is None or isinstance(node, bool | str | int | float):
        return node
    if depth > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(node, list):
        return [_decode(v, tensors, depth + 1) for v in node]
    if not isinstance(node, dict) or len(node) not in (1, 2):
        raise ValueError("unexpected node")
    if "tensor" in node:
        return tensors[node["tensor"]]
    if "ndarray" in node:
        return _array(tensors[node["ndarray"]], node.get("dtype"))
    if "float" in node:
        return float(node["float"])
    if "np" in node:
        kind = _dtype(node["np"], _SCALAR_KINDS)
        value = _decode(node["value"], tensors, depth + 1)
        if not isinstance(value, bool | int | float | complex | str | bytes):
            raise ValueError(f"a numpy {kind} scalar holds a {type(value).__name__}")
        return kind.type(value)
    if "tuple" in node:
        return tuple(_decode(v, tensors, depth + 1) for v in node["tuple"])
    if "dict" in node:
        return {_decode(k, tensors, depth + 1): _decode(v, tensors, depth + 1) for k, v in node["dict"]}
    if "object" in node:
        return _CLASSES[node["object"]](**_decode(node["fields"], tensors, depth + 1))
    raise ValueError("unexpected node")


def _dtype(text: Any, kinds: str) -> np.dtype:
    """The numpy dtype named ``text`` if it is one the writer writes (of ``kinds``, at most 16 bytes an item)."""
    if not isinstance(text, str) or len(text) > 8:
        raise ValueError(f"dtype {str(text)[:20]!r} is not one fedcluster writes")
    try:
        dtype = np.dtype(text)
    except TypeError:
        raise ValueError(f"dtype {text!r} is not one fedcluster writes") from None
    if dtype.kind not in kinds or (dtype.kind not in "US" and dtype.itemsize > 16) or dtype.hasobject:
        raise ValueError(f"dtype {text!r} is not one fedcluster writes")
    return dtype


def _array(tensor: torch.Tensor, text: Any) -> np.ndarray:
    """The numpy array stored as ``tensor`` with dtype ``text``: the same item size (only the byte order may
    differ), so it takes exactly the bytes the file holds."""
    dtype = _dtype(text, _ARRAY_KINDS)
    if not isinstance(tensor, torch.Tensor):
        raise ValueError("an array node names no stored tensor")
    native = tensor.numpy()
    if native.dtype != dtype.newbyteorder("="):
        raise ValueError(f"an array stored as {native.dtype} claims dtype {dtype}")
    return native.astype(dtype, copy=False)


def _digest(header: dict[str, str], tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256(json.dumps(header, sort_keys=True).encode())
    for name in sorted(tensors, key=int):
        t = tensors[name]
        h.update(f"|{name}:{t.dtype}:{list(t.shape)}|".encode())
        if t.numel():  # an empty tensor has no bytes (and may carry a stride of 0)
            h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


def _unreadable(path: Path) -> str:
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if magic.startswith(_PICKLE_MAGIC):
        return "is a pickle file (an older fedcluster format?); it is never unpickled because a pickle can run code"
    return "is truncated or corrupt (not a readable fedcluster state file)"


def encode_state(state: Any) -> tuple[str, dict[str, torch.Tensor]]:
    """``state`` as the JSON structure of a state file and its tensors (CPU), e.g. to send it to other
    processes without pickle; :func:`decode_state` inverts it."""
    tensors: dict[str, torch.Tensor] = {}
    return json.dumps(_encode(state, tensors), allow_nan=False), tensors


def decode_state(tree: str, tensors: dict[str, torch.Tensor]) -> Any:
    return _decode(json.loads(tree), tensors)


def _decoded(path: Path, tree: str, tensors: dict[str, torch.Tensor]) -> Any:
    """``tree`` decoded, any malformation (too deep for the JSON parser included) as a :class:`StateFileError`."""
    try:
        return _decode(json.loads(tree), tensors)
    except (ValueError, KeyError, TypeError, OverflowError, IndexError, RecursionError) as e:
        raise StateFileError(path, f"has a malformed structure ({str(e)[:200]})") from None


# -- files -----------------------------------------------------------------------------------------
def save_state(path: Path, state: Any, kind: str, key: str = "", hint: str = "free some space") -> None:
    """Write ``state`` atomically to ``path`` (raises ``StorageError`` naming ``hint`` when it cannot)."""
    tensors: dict[str, torch.Tensor] = {}
    tree = json.dumps(_encode(state, tensors), allow_nan=False)
    header = {"format": FORMAT, "version": VERSION, "kind": kind, "key": key, "tree": tree}
    data = safetensors_bytes(tensors, metadata={**header, "sha256": _digest(header, tensors)})
    atomic_write(Path(path), data, hint)


def load_state(path: Path, kind: str, key: str | None = None) -> Any:
    """Read a state written by :func:`save_state`; raise :class:`StateFileError` unless the file is intact,
    of ``kind`` and (when given) of ``key``. Nothing in the file is executed."""
    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = dict(f.metadata() or {})
            tensors = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (not a dict)
    except Exception:  # noqa: BLE001 (any failure to parse an untrusted file means: unusable)
        raise StateFileError(path, _unreadable(path)) from None
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise StateFileError(path, "is not a fedcluster state file of this version")
    header = {k: meta.get(k, "") for k in ("format", "version", "kind", "key", "tree")}
    if not all(name.isdigit() for name in tensors) or meta.get("sha256") != _digest(header, tensors):
        raise StateFileError(path, "is corrupt or was modified (its SHA-256 checksum does not match)")
    if header["kind"] != kind:
        raise StateFileError(path, f"holds a {header['kind']}, not a {kind}")
    if key is not None and header["key"] != key:
        raise StateFileError(path, "belongs to another configuration (its key does not match)")
    return _decoded(path, header["tree"], tensors)


# -- reading parts of a file ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TensorRef:
    """A tensor of a state file left unread by :meth:`StateParts.load` (read its rows with :meth:`StateParts.rows`)."""

    name: str
    shape: tuple[int, ...]


class StateParts:
    """A state file opened to read parts of it: the checksum is checked by streaming the file (it is never
    held whole), then :meth:`load` gives the state with the tensors named in ``unread`` as :class:`TensorRef`
    and :meth:`rows` reads some rows of one. Use as a context manager."""

    CHUNK = 4 * 2**20  # bytes read at a time (small reads: the allocator reuses the same few megabytes)

    def __init__(self, path: Path, kind: str, key: str | None = None) -> None:
        self.path = Path(path)
        try:
            self._file = safe_open(str(self.path), framework="pt")
            meta = dict(self._file.metadata() or {})
            self.names = list(self._file.keys())  # noqa: SIM118 (not a dict)
        except Exception:  # noqa: BLE001 (any failure to parse an untrusted file means: unusable)
            raise StateFileError(self.path, _unreadable(self.path)) from None
        if meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise StateFileError(self.path, "is not a fedcluster state file of this version")
        self.header = {k: meta.get(k, "") for k in ("format", "version", "kind", "key", "tree")}
        if not all(name.isdigit() for name in self.names) or meta.get("sha256") != self._streamed_digest():
            raise StateFileError(self.path, "is corrupt or was modified (its SHA-256 checksum does not match)")
        if self.header["kind"] != kind:
            raise StateFileError(self.path, f"holds a {self.header['kind']}, not a {kind}")
        if key is not None and self.header["key"] != key:
            raise StateFileError(self.path, "belongs to another configuration (its key does not match)")

    def __enter__(self) -> StateParts:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file = None

    def _streamed_digest(self) -> str:
        """:func:`_digest` of the file, reading each tensor ``CHUNK`` bytes of rows at a time."""
        h = hashlib.sha256(json.dumps(self.header, sort_keys=True).encode())
        for name in sorted(self.names, key=int):
            part = self._file.get_slice(name)
            shape = list(part.get_shape())
            if not shape or not shape[0] or math.prod(shape) == 0:
                t = self._file.get_tensor(name)
                h.update(f"|{name}:{t.dtype}:{list(t.shape)}|".encode())
                if t.numel():
                    h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy())
                continue
            row = max(1, math.prod(shape[1:]))
            step = max(1, self.CHUNK // (row * 8))
            for lo in range(0, shape[0], step):
                t = part[lo:lo + step]
                if lo == 0:
                    h.update(f"|{name}:{t.dtype}:{shape}|".encode())
                h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy())
        return h.hexdigest()

    def tensor_at(self, *keys: str) -> str | None:
        """The name of the tensor at ``state[keys[0]][keys[1]]...`` (dicts only), None if there is none."""
        try:
            node: Any = json.loads(self.header["tree"])
        except (ValueError, RecursionError):
            raise StateFileError(self.path, "has a malformed structure (not JSON, or nested too deeply)") from None
        for key in keys:
            if not isinstance(node, dict) or not isinstance(node.get("dict"), list):
                return None
            node = next((v for pair in node["dict"] if isinstance(pair, list) and len(pair) == 2
                         for k, v in [pair] if k == key), None)
        return node.get("tensor") if isinstance(node, dict) and isinstance(node.get("tensor"), str) else None

    def load(self, unread: set[str]) -> Any:
        """The state, with the tensors named in ``unread`` left as :class:`TensorRef`."""
        reader = self

        class _Tensors(dict):
            def __missing__(self, name: str) -> Any:
                if name in unread:
                    return TensorRef(name, tuple(reader._file.get_slice(name).get_shape()))
                return reader._file.get_tensor(name)

        return _decoded(self.path, self.header["tree"], _Tensors())

    def rows(self, ref: TensorRef, rows: np.ndarray) -> torch.Tensor:
        """Rows ``rows`` (increasing) of the tensor ``ref``, read ``CHUNK`` bytes of consecutive rows at a time
        into one tensor."""
        rows = np.asarray(rows, dtype=np.int64)
        part = self._file.get_slice(ref.name)
        first = part[0:0]
        out = first.new_empty((len(rows), *first.shape[1:]))
        if not len(rows):
            return out
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        step = max(1, self.CHUNK // max(1, out[:1].nbytes))
        at = 0
        for lo, hi in zip(rows[np.r_[0, breaks]], rows[np.r_[breaks - 1, len(rows) - 1]] + 1, strict=True):
            for a in range(int(lo), int(hi), step):
                b = min(int(hi), a + step)
                out[at:at + b - a] = part[a:b]
                at += b - a
        return out
