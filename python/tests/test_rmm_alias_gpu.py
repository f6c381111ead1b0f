"""`import rmm` as an older RMM release (install_as_rmm's rmm_version) on a GPU: what its
statistics count. Each case runs in a fresh process (the alias changes the import system)."""

from conftest import run_python


def test_rmm_25_10_s_rounding_is_what_its_statistics_count(gpu):
    """Under rmm_version="25.10" a DeviceBuffer asks its resource for its size rounded up to 16
    bytes, as RMM 25.10 did (its statistics count 32 for a 20-byte buffer); the buffer is still
    the size asked, its bytes intact. Newer versions, and after uninstall, count what is asked."""
    r = run_python(
        """
        import sys, numpy as np
        import crmm, crmm.mr as mr
        host = np.arange(20, dtype=np.uint8)
        src = crmm.DeviceBuffer.to_device(host)
        for version, counted in (("25.10", 32), ("25.12", 20), (None, 20), ("25.08.01", 32)):
            crmm.install_as_rmm(rmm_version=version)
            stats = mr.StatisticsResourceAdaptor(mr.CudaMemoryResource())
            mr.set_current_device_resource(stats)
            b = crmm.DeviceBuffer(size=20)
            c = crmm.DeviceBuffer(ptr=src.ptr, size=20)
            assert b.size == 20 and c.size == 20 and b.capacity() == counted
            assert (c.copy_to_host() == host).all() and not b.copy_to_host().any()
            assert stats.allocation_counts.current_bytes == 2 * counted, (version, stats.allocation_counts)
            del b, c
            assert stats.allocation_counts.current_bytes == 0
            crmm.uninstall_as_rmm()
        crmm.install_as_rmm(rmm_version="25.10")
        crmm.uninstall_as_rmm()
        b = crmm.DeviceBuffer(size=20)
        assert b.capacity() == 20
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
