"""Running out of memory under crmm on a GPU, as a PyTorch program sees it: torch.OutOfMemoryError
(with "CUDA out of memory." in its message, which batch-size finders look for), after which the
program goes on allocating and computing; and torch.cuda.set_per_process_memory_fraction bounding
what crmm holds. Needs crmm's hooks for PyTorch (built where configure found torch's headers):
without them PyTorch gets NULL and no exception."""

import os

import pytest

from conftest import EXPANDABLE_POOL_CONFIG, framework, host_config, run_python

LIMITED_POOL_CONFIG = EXPANDABLE_POOL_CONFIG + "maximum_size = 256MiB\n"


def hooks_or_skip():
    framework("torch")
    if os.environ.get("CRMM_TORCH_HOOKS", "off") == "off":
        pytest.skip("crmm's hooks for PyTorch are not built here")


def test_running_out_raises_torchs_out_of_memory_error_and_the_program_goes_on(gpu, tmp_path):
    hooks_or_skip()
    r = run_python(
        """
        import crmm.allocators.torch as ct
        ct.use_crmm()
        import torch
        MiB = 1 << 20
        kept = torch.ones(64 * MiB // 4, device="cuda")
        batch = 512
        while True:  # what a batch-size finder does: halve until it fits
            try:
                x = torch.empty(batch * MiB, dtype=torch.uint8, device="cuda")
                break
            except torch.OutOfMemoryError as e:
                assert "CUDA out of memory." in str(e) and "crmm" in str(e), str(e)
                batch //= 2
        assert batch == 128, batch  # 512 and 256 do not fit beside the 64 MiB kept
        x.fill_(1)
        # sums over one element a MiB: a sum of all of x would ask for a 1 GiB int64 copy, more than
        # the 256 MiB pool holds
        assert int(x[::MiB].sum().item()) == batch
        assert float(kept[::MiB // 4].sum().item()) == 64  # nothing already held was touched
        del x
        y = torch.empty(128 * MiB, dtype=torch.uint8, device="cuda")  # the freed memory serves again
        print("ok")
        """,
        env={"CRMM_CONFIG": host_config(tmp_path, LIMITED_POOL_CONFIG)},
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_a_memory_fraction_bounds_what_crmm_holds(gpu, tmp_path):
    hooks_or_skip()
    r = run_python(
        """
        import crmm.allocators.torch as ct
        ct.use_crmm()
        import torch
        MiB = 1 << 20
        x = torch.ones(64 * MiB // 4, device="cuda")
        total = torch.cuda.get_device_properties(0).total_memory
        limit = torch.cuda.memory_reserved() + 128 * MiB
        torch.cuda.set_per_process_memory_fraction(limit / total)
        y = torch.empty(96 * MiB, dtype=torch.uint8, device="cuda")  # within it
        try:
            z = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
            raise SystemExit("allocated past the fraction")
        except torch.OutOfMemoryError as e:
            assert "set_per_process_memory_fraction" in str(e), str(e)
        assert torch.cuda.memory_reserved() <= limit  # the refused request left nothing held
        del y
        torch.cuda.synchronize()
        z = torch.empty(120 * MiB, dtype=torch.uint8, device="cuda")  # y's memory, given back or reused
        del z
        torch.cuda.set_per_process_memory_fraction(1.0)  # a new fraction replaces the old
        z = torch.empty(512 * MiB, dtype=torch.uint8, device="cuda")
        assert float(x.sum().item()) == 16 * MiB
        print("ok")
        """,
        env={"CRMM_CONFIG": host_config(tmp_path, EXPANDABLE_POOL_CONFIG)},
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
