"""tensor.record_stream under crmm on a GPU: a tensor that another stream still reads when it is
freed is not overwritten by the next allocation on its own stream. Needs crmm's hooks for PyTorch
(built where configure found torch's headers), which pass record_stream on to crmm."""

import os

import pytest

from conftest import EXPANDABLE_POOL_CONFIG as POOL_CONFIG, framework, host_config, run_python


def test_memory_recorded_on_another_stream_waits_for_that_streams_work(gpu, tmp_path):
    framework("torch")
    if os.environ.get("CRMM_TORCH_HOOKS", "off") == "off":
        pytest.skip("crmm's hooks for PyTorch are not built here")
    r = run_python(
        """
        import crmm.allocators.torch as ct
        ct.use_crmm()
        import torch
        assert ct.record_stream_installed()
        n = 16 << 20
        main, side = torch.cuda.current_stream(), torch.cuda.Stream()
        x = torch.ones(n, device="cuda")
        side.wait_stream(main)
        with torch.cuda.stream(side):
            torch.cuda._sleep(500_000_000)  # side is busy for a while, then reads x
            y = x * 2
        x.record_stream(side)
        where = x.data_ptr()
        del x  # freed on main while side has not read it yet
        z = torch.empty(n, device="cuda")  # main's next block of that size: x's memory
        assert z.data_ptr() == where, "the pool did not hand x's memory out again: the test shows nothing"
        z.fill_(7.0)  # ordered after side's read only because of the record
        torch.cuda.synchronize()
        assert bool((y == 2).all()), y.unique()
        assert bool((z == 7).all())
        print("ok")
        """,
        env={"CRMM_CONFIG": host_config(tmp_path, POOL_CONFIG)},
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
