"""CPU host buffers: large blocks freed are kept for the next buffer of the
same size (pyflame.backend.cpu), which must hold the new values only, and
are not counted as allocated."""
import numpy as np

import pyflame as pf

cpu = pf.backend.cpu
N = 3 << 20  # 12 MiB of float32: a large block (4 MiB and up)


def test_a_freed_large_block_serves_the_next_one_of_its_size():
    cpu.empty_cache()
    x = pf.tensor(np.arange(N, dtype=np.float32))
    base = cpu.memory_allocated()
    y = pf.eval(x * 2.0)
    assert cpu.memory_allocated() - base == y.nbytes
    del y  # kept, not counted
    assert cpu.memory_allocated() == base
    z = pf.eval(x + 1.0)  # takes the kept block: nothing left to release
    assert cpu.empty_cache() == 0
    np.testing.assert_array_equal(z.numpy(), np.arange(N, dtype=np.float32) + 1)
    del z
    assert cpu.empty_cache() >= N * 4  # released to the system
    assert cpu.empty_cache() == 0


def test_kept_blocks_are_bounded():
    cpu.empty_cache()
    xs = [pf.eval(pf.full((N + k * 1024,), float(k))) for k in range(8)]  # eight sizes
    del xs
    kept, block = cpu.empty_cache(), 2 << 20  # blocks are whole 2 MiB pages
    assert 0 < kept <= 4 * -(-(N + 8 * 1024) * 4 // block) * block  # four blocks at most
