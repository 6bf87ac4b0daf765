"""The wire's value vocabulary (``codec.TAGS``) is one table: a value of every tag crosses a real
``SOCK_SEQPACKET`` socket and comes back equal; the encoder produces no tag outside the table and the
decoder accepts none."""

from __future__ import annotations

import pathlib
import socket

import numpy as np
import pytest
import torch

from autograder.sandbox.inside import codec, wire


class _Opaque:
    """Not plain data: crosses as a handle."""


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.stride() == b.stride()
                and torch.equal(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    return type(a) is type(b) and a == b


# one value per tag; "ref" and "local" are handles (their value is what the callbacks make of them)
SAMPLES = {
    "bigint": 2**80, "float": float("-inf"), "complex": 1.5 - 2j, "bytes": b"\x00\xffab",
    "tuple": (1, "a"), "list": [1, [2]], "dict": {3: "x", ("k",): None}, "set": {1, 2},
    "frozenset": frozenset({"a"}), "slice": slice(1, None, 2), "ellipsis": ..., "range": range(2, 9, 3),
    "tensor": torch.arange(12.0).reshape(3, 4).t(), "dtype": torch.bfloat16,
    "device": torch.device("cpu"), "size": torch.Size([2, 3]),
    "ndarray": np.arange(6, dtype=np.int16).reshape(2, 3), "npscalar": np.float32(2.5),
    "npdtype": np.dtype("<u4"), "nptype": np.float64, "path": pathlib.Path("/data/x.bin"),
    "ref": _Opaque(),
}


def _across_a_socket(value):
    refs: dict[int, object] = {}

    def ref(obj):
        refs[id(obj)] = obj
        return {"$": "ref", "id": id(obj)}

    encoder = codec.Encoder(ref)
    tree = encoder.encode(value)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        wire.send(ours, {"value": tree}, encoder.blobs)
        header, blobs = wire.recv(theirs, timeout=5)
    decoded = codec.Decoder(blobs, lambda handle: refs[handle["id"]]).decode(header["value"])
    return tree, decoded


def _tags(tree) -> set[str]:
    if isinstance(tree, dict):
        found = {tree["$"]} if "$" in tree else set()
        return found.union(*(_tags(v) for v in tree.values()))
    if isinstance(tree, list):
        return set().union(*(_tags(v) for v in tree))
    return set()


def test_every_tag_has_a_sample():
    assert set(SAMPLES) | {"local"} == set(codec.TAGS)


@pytest.mark.parametrize("tag", sorted(SAMPLES))
def test_each_tag_round_trips_through_a_socket(tag):
    value = SAMPLES[tag]
    tree, back = _across_a_socket(value)
    assert tree["$"] == tag, f"{value!r} was encoded as {tree['$']!r}, not {tag!r}"
    assert _tags(tree) <= set(codec.TAGS)
    assert back is value if tag == "ref" else _equal(value, back), (value, back)


def test_a_local_handle_is_resolved_by_the_receiver():
    decoder = codec.Decoder([], lambda handle: ("mine", handle["id"]))
    assert decoder.decode({"$": "local", "id": 7}) == ("mine", 7)


def test_a_tag_outside_the_table_is_refused():
    for tag in ("pickle", "eval", "", None):
        with pytest.raises(wire.WireError, match="unknown value kind"):
            codec.Decoder([], lambda handle: None).decode({"$": tag, "v": 1})
