import numpy as np
import pytest

from zoo.methods.praxis.bitset import full_mask, n_words, pack_columns, pack_vector, popcount, unpack


@pytest.mark.parametrize("n", [1, 63, 64, 65, 130])
def test_pack_unpack_roundtrip_and_padding(n):
    rng = np.random.default_rng(n)
    X = rng.integers(0, 2, size=(n, 3))
    packed = pack_columns(X)
    assert packed.shape == (3, n_words(n)) and packed.dtype == np.uint64
    assert np.array_equal(unpack(packed, n), X.T.astype(bool))
    assert np.array_equal(popcount(packed), X.sum(0))
    assert popcount(full_mask(n)[None])[0] == n  # padding bits stay clear


def test_bit_layout_is_row_i_at_bit_i_mod_64():
    v = np.zeros(70, dtype=np.uint8)
    v[[0, 5, 64, 69]] = 1
    w = pack_vector(v)
    assert int(w[0]) == (1 << 0) | (1 << 5) and int(w[1]) == (1 << 0) | (1 << 5)


@pytest.mark.parametrize(
    "bad", [np.array([[0, 2]]), np.array([[-1, 0]]), np.array([[0.0, 0.5]]), np.array([[1, 0]], dtype=np.uint8) * 3]
)
def test_pack_rejects_non_binary(bad):
    with pytest.raises(ValueError, match="0/1"):
        pack_columns(bad)


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int64, np.float32])
def test_pack_accepts_zeros_and_ones_of_any_dtype(dtype):
    X = np.array([[1, 0], [0, 1], [1, 1]], dtype=dtype)
    assert pack_columns(X).tolist() == [[0b101], [0b110]]
