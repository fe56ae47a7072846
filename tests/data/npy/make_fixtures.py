# Regenerates the .npy fixtures read by tests/runtime/npy_test.cpp (needs numpy; the
# tests themselves do not). Run from this folder: python3 make_fixtures.py
import numpy as np
from numpy.lib import format as fmt

np.save('f32_2x3.npy', np.array([[1.5, -2.0, 3.25], [0.0, 1e-3, -7.0]], dtype='<f4'))
np.save('f64_scalar.npy', np.array(3.141592653589793, dtype='<f8'))
np.save('f16_4.npy', np.array([1.0, -0.5, 65504.0, 2**-24], dtype='<f2'))
np.save('i8_3.npy', np.array([-128, 0, 127], dtype='i1'))
np.save('i32_2x2.npy', np.array([[1, -2], [2147483647, -2147483648]], dtype='<i4'))
np.save('i64_3.npy', np.array([-9223372036854775808, 0, 9223372036854775807], dtype='<i8'))
np.save('u8_2x2x1.npy', np.array([[[0], [255]], [[7], [128]]], dtype='u1'))
np.save('bool_4.npy', np.array([True, False, False, True]))
np.save('i16_3.npy', np.array([-32768, -1, 32767], dtype='<i2'))
np.save('u16_3.npy', np.array([0, 40000, 65535], dtype='<u2'))
np.save('u32_3.npy', np.array([0, 3000000000, 4294967295], dtype='<u4'))
np.save('u64_3.npy', np.array([0, 9223372036854775809, 18446744073709551615], dtype='<u8'))
np.save('empty_0x3.npy', np.zeros((0, 3), dtype='<f4'))
with open('f32_v2.npy', 'wb') as f:
    fmt.write_array(f, np.arange(4, dtype='<f4'), version=(2, 0))
with open('f32_v3.npy', 'wb') as f:
    fmt.write_array(f, np.arange(4, dtype='<f4'), version=(3, 0))
# Files carve must reject with kUnsupported.
np.save('fortran_2x3.npy', np.asfortranarray(np.arange(6, dtype='<f4').reshape(2, 3)))
np.save('big_endian_f4.npy', np.arange(3, dtype='>f4'))
np.save('c64.npy', np.zeros(2, dtype='<c8'))
np.save('structured.npy', np.zeros(2, dtype=[('a', '<f4'), ('b', '<i4')]))
