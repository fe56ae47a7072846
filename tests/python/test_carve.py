"""The `carve` Python module (python/): compile, run, zero copy, DLPack, plan, handles,
errors. Each test function is its own CTest test, python/<name>."""
import json
import threading

import numpy as np
import pytest

import carve
from conftest import source_path

# y = x * x + x; acc += y each run (a handle).
ACC = """graph square_acc {
  handle acc: f32[4]
  input x: f32[4]
  m = mul(x, x) -> sq: f32[4]
  a = add(sq, x) -> y: f32[4]
  r = read_handle() {handle="acc"} -> prev: f32[4]
  s = add(prev, y) -> total: f32[4]
  w = write_handle(total) {handle="acc"}
  output y
}"""


def test_version_and_error_classes():
    assert carve.__version__ == "0.1.0"
    for cls in (carve.InvalidArgumentError, carve.ParseError, carve.ShapeError, carve.CancelledError,
                carve.InfeasibleError, carve.UnavailableError, carve.IoError):
        assert issubclass(cls, carve.Error)
    assert carve.ShapeError.code == "ShapeError" and carve.CancelledError.code == "Cancelled"


def test_onnx_model_matches_pytorch(session, onnx):
    program = session.compile(source_path("tests/onnx/models/resnet_tiny.onnx"), strategy="best")
    image = np.load(source_path("tests/onnx/models/resnet_tiny.input.image.npy"))
    want = np.load(source_path("tests/onnx/models/resnet_tiny.output.logits.npy"))
    assert [s.name for s in program.inputs] == ["image"]
    outs = program.run({"image": image})
    assert set(outs) == {"logits"}
    np.testing.assert_allclose(outs["logits"], want, atol=1e-4, rtol=0)
    plan = program.plan
    assert plan.lower_bound <= plan.arena_bytes <= plan.no_reuse_bytes
    arena = [v for v in plan.values if v.in_arena]
    assert arena and len({v.storage_id for v in arena}) == 1  # one arena storage
    assert len({v.buffer_id for v in arena}) == len(arena)    # one view per value
    assert all(0 <= v.offset and v.offset + v.size <= plan.arena_bytes for v in arena)
    assert [v for v in plan.values if v.name == "image"][0].in_arena is False


def test_text_string_and_text_file(session, jit):
    program = session.compile(source_path("examples/embed_c/model.carve"))
    x = np.array([[1, 2, 3], [-1, 0.5, 2]], dtype=np.float32)
    y = program.run([x])["y"]
    np.testing.assert_allclose(y, [[0, 2.8, 2.05, 3.1], [0, 3.05, 1.675, 0]], atol=1e-5)
    acc = session.compile(ACC)
    np.testing.assert_array_equal(acc.run({"x": np.arange(4, dtype=np.float32)})["y"], [0, 2, 6, 12])


def test_unsigned_and_16_bit_dtypes(session, jit):
    # numpy's uint64/uint32/uint16/int16 map to carve's u64/u32/u16/i16 both ways; u64
    # values past 2**63 divide and compare as unsigned numbers.
    program = session.compile("""graph wide {
  input a: u64[3]
  input b: u64[3]
  input h: i16[2]
  q = div(a, b) -> quot: u64[3]
  c = greater(a, b) -> gt: bool[3]
  n = cast(h) {to="u16"} -> hu: u16[2]
  output quot
  output gt
  output hu
}""")
    a = np.array([2**64 - 1, 2**63 + 10, 7], dtype=np.uint64)
    b = np.array([2, 3, 2**63], dtype=np.uint64)
    outs = program.run({"a": a, "b": b, "h": np.array([-1, 300], dtype=np.int16)})
    assert outs["quot"].dtype == np.uint64 and outs["hu"].dtype == np.uint16
    np.testing.assert_array_equal(outs["quot"], a // b)
    np.testing.assert_array_equal(outs["gt"], a > b)
    np.testing.assert_array_equal(outs["hu"], [65535, 300])


def test_input_and_output_are_zero_copy(session, jit):
    program = session.compile(ACC)
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    y = np.zeros(4, dtype=np.float32)
    out = program.run({"x": x}, outputs={"y": y})["y"]
    assert out is y and y[3] == 20  # filled in place
    x[3] = 10  # the kernel reads the array's memory: no copy was taken
    program.run({"x": x}, outputs={"y": y})
    assert y[3] == 110
    # The output given is the input's own memory: carve sees the overlap by address, which
    # it could not if the input had been copied.
    with pytest.raises(carve.InvalidArgumentError):
        program.run({"x": x}, outputs={"y": x})


class DLPackOnly:
    """A producer with only the DLPack protocol (as a torch tensor would be seen)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_input_is_zero_copy(session, jit):
    program = session.compile(ACC)
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    np.testing.assert_array_equal(program.run({"x": DLPackOnly(x)})["y"], [2, 6, 12, 20])
    with pytest.raises(carve.InvalidArgumentError):  # same memory as the output: not a copy
        program.run({"x": DLPackOnly(x)}, outputs={"y": x})


def test_noncontiguous_input_is_copied_once(session, jit):
    program = session.compile(ACC)
    wide = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(program.run({"x": wide[::2]})["y"], [0, 6, 20, 42])


def test_handles_persist_and_share(session, jit):
    program = session.compile(ACC)
    x = np.ones(4, dtype=np.float32)
    for _ in range(3):
        program.run({"x": x})
    np.testing.assert_array_equal(program.handle("acc"), [6, 6, 6, 6])
    copy = program.handle("acc")
    copy[:] = 100  # a copy: the handle is unchanged
    np.testing.assert_array_equal(program.handle("acc"), [6, 6, 6, 6])
    program.set_handle("acc", np.zeros(4, dtype=np.float32))
    other = session.compile(ACC, share_handles_with=program)
    other.run({"x": x})
    np.testing.assert_array_equal(program.handle("acc"), [2, 2, 2, 2])
    with pytest.raises(carve.NotFoundError, match="acc"):
        program.handle("kv")
    with pytest.raises(carve.ShapeError):
        program.set_handle("acc", np.zeros(3, dtype=np.float32))


def test_errors_name_what_is_wrong(session, jit):
    with pytest.raises(carve.ParseError, match="3:"):
        session.compile("graph g {\n  input x: f32[4]\n  y = frobnicate(x) -> z: f32[4]\n  output z\n}")
    with pytest.raises(carve.IoError, match="missing.carve"):
        session.compile("/nonexistent/missing.carve")
    program = session.compile(ACC)
    with pytest.raises(carve.ShapeError):
        program.run({"x": np.zeros(3, dtype=np.float32)})
    with pytest.raises(carve.TypeMismatchError):
        program.run({"x": np.zeros(4, dtype=np.int32)})
    with pytest.raises(carve.InvalidArgumentError, match="'x' is missing"):
        program.run({})
    with pytest.raises(carve.NotFoundError, match="'z'"):
        program.run({"x": np.zeros(4, dtype=np.float32), "z": 1})
    with pytest.raises(carve.InvalidArgumentError, match="device"):
        carve.Session(device="tpu")


def test_cancel_and_timeout(session, jit):
    program = session.compile(ACC)
    x = np.ones(4, dtype=np.float32)
    token = carve.CancelToken()
    program.run({"x": x}, cancel=token)
    worker = threading.Thread(target=token.cancel)  # from another thread, as a caller would
    worker.start()
    worker.join()
    with pytest.raises(carve.CancelledError):
        program.run({"x": x}, cancel=token)
    with pytest.raises(carve.CancelledError):
        program.run({"x": x}, timeout=1e-9)


def test_hazard_check_and_trace(session, jit, tmp_path):
    program = session.compile(ACC)
    program.run({"x": np.ones(4, dtype=np.float32)}, check_hazards=True)
    info = program.last_run
    assert info["hazards_checked"] and info["races"] == 0
    path = tmp_path / "trace.json"
    program.write_trace(str(path))
    assert "traceEvents" in json.loads(path.read_text())


def test_planner_alone_on_minimalloc_csv():
    csv = source_path("tests/data/minimalloc/examples__input.12.csv")
    result = carve.plan(csv, strategy="exact")
    assert result.optimal and result.arena_bytes == result.lower_bound == 12
    assert set(result.offsets) == {"b1", "b2", "b3", "b4", "b5"}
    assert carve.plan(csv, strategy="exact", capacity=12).arena_bytes <= 12
    with pytest.raises(carve.InfeasibleError):
        carve.plan(csv, strategy="exact", capacity=8)
    with pytest.raises(carve.NotFoundError):
        carve.plan(csv, strategy="no-such-strategy")
