"""The package itself: public names documented, type stubs shipped next to the extension."""

import inspect
import pathlib

import kvsim
from kvsim import _kvsim


def test_every_public_function_has_a_docstring():
    for name in kvsim.__all__:
        obj = getattr(kvsim, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert inspect.getdoc(obj), name
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and callable(member):
                    assert inspect.getdoc(member), f"{name}.{attr}"


def test_type_stubs_are_next_to_the_extension():
    pkg = pathlib.Path(_kvsim.__file__).parent
    stub = pkg / "_kvsim.pyi"
    assert stub.exists()
    text = stub.read_text()
    for name in ("class BlockPool", "class KVCacheManager", "def replay(", "def read_trace(",
                 "def get_new_blocks(", "def allocate_slots("):
        assert name in text, name
    assert (pkg / "py.typed").exists()
