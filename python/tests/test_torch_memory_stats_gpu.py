"""crmm.allocators.torch.memory_stats() in a PyTorch process on a GPU: the figures follow the
tensors PyTorch allocates through crmm's default expandable pool, the peaks reset, and the pool
reports what it asked of the device."""

from conftest import EXPANDABLE_POOL_CONFIG as POOL_CONFIG, framework, host_config, run_python


def test_memory_stats_follow_torch_tensors(gpu, tmp_path):
    framework("torch")
    r = run_python(
        """
        import crmm.allocators.torch as ct
        ct.use_crmm()
        import torch
        MiB = 1 << 20
        torch.cuda.init()
        base = ct.memory_stats()
        b_req, b_alloc = base.get("requested_bytes.all.current", 0), base.get("allocated_bytes.all.current", 0)
        x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
        s = ct.memory_stats()
        assert s["requested_bytes.all.current"] - b_req == 64 * MiB, s
        assert s["allocated_bytes.all.current"] - b_alloc == 64 * MiB, s
        assert s["reserved_bytes.all.current"] >= s["allocated_bytes.all.current"], s
        assert s["crmm.pages_mapped"] >= 32 and s["crmm.growths"] >= 1, s
        assert s["crmm.thread_caches"] == 0, s
        assert ct.memory_allocated(0) == ct.memory_allocated("cuda:0") == ct.memory_allocated(torch.device("cuda", 0))
        y = torch.empty(16 * MiB, dtype=torch.uint8, device="cuda")
        del y
        assert ct.max_memory_allocated() >= b_alloc + 80 * MiB
        ct.reset_peak_memory_stats()
        assert ct.max_memory_allocated() == ct.memory_allocated() == b_alloc + 64 * MiB
        del x
        torch.cuda.synchronize()
        assert ct.memory_allocated() == b_alloc
        assert ct.max_memory_allocated() == b_alloc + 64 * MiB
        print("ok")
        """,
        env={"CRMM_CONFIG": host_config(tmp_path, POOL_CONFIG)},
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_torchs_own_memory_functions_answer_from_crmm(gpu, tmp_path):
    """What a PyTorch program already calls keeps working under use_crmm(): torch.cuda's memory
    figures are crmm's, reset_peak_memory_stats() resets them, memory_summary() prints them, and
    empty_cache() gives the pool's free pages back (crmm's own reserved figure, not the device's
    free memory, which other things move)."""
    framework("torch")
    r = run_python(
        """
        import crmm.allocators.torch as ct
        ct.use_crmm()
        import torch
        MiB = 1 << 20
        x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
        assert torch.cuda.memory_allocated() == ct.memory_allocated() >= 64 * MiB
        assert torch.cuda.memory_allocated(0) == torch.cuda.memory_allocated("cuda:0")
        assert torch.cuda.memory_reserved() == ct.memory_reserved() >= torch.cuda.memory_allocated()
        base = torch.cuda.memory_allocated()
        y = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
        del y
        assert torch.cuda.max_memory_allocated() >= base + 256 * MiB
        torch.cuda.reset_peak_memory_stats()
        assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated() == base
        torch.cuda.reset_accumulated_memory_stats()
        s = torch.cuda.memory_stats()
        assert s["allocated_bytes.all.current"] == base and s["num_device_alloc"] >= 32, s
        assert s["crmm.growths"] >= 1, s
        text = torch.cuda.memory_summary()
        assert "PyTorch CUDA memory summary" in text and "Allocated memory" in text, text
        held = torch.cuda.memory_reserved()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        # y's pages, but for the two it may share with its neighbours
        assert torch.cuda.memory_reserved() <= held - 252 * MiB, (held, torch.cuda.memory_reserved())
        assert torch.cuda.memory_reserved() >= torch.cuda.memory_allocated() == base
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.cuda.set_per_process_memory_fraction(1.0)  # the pool says what it holds: bounded, no warning
        assert x.fill_(3).sum().item() == 3 * 64 * MiB  # the live tensor is untouched
        print("ok")
        """,
        env={"CRMM_CONFIG": host_config(tmp_path, POOL_CONFIG)},
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
