"""FailureCallbackResourceAdaptor over host memory (no device needed): the Python callback is
called with the size that failed; True retries, False lets the failure through, an exception is
raised by the allocation;
the C resource never calls a callback that is gone."""

import gc

import pytest

import crmm
import crmm.mr as mr


def limited(limit=4096):
    return mr.LimitingResourceAdaptor(mr.HostMemoryResource(), limit)


def test_true_retries_after_the_callback_made_room():
    lim = limited()
    held = []
    calls = []

    def make_room(nbytes):
        calls.append(nbytes)
        if not held:
            return False
        lim.deallocate(held.pop(), 4096)
        return True

    fcb = mr.FailureCallbackResourceAdaptor(lim, make_room)
    assert fcb.upstream_mr is lim
    held.append(fcb.allocate(4096))
    p = fcb.allocate(4096)  # fails once, the callback frees, the retry succeeds
    assert calls == [4096]
    with pytest.raises(MemoryError):
        fcb.allocate(4096)  # nothing left to free: the callback says False
    assert calls == [4096, 4096]
    fcb.deallocate(p, 4096)


def test_an_exception_in_the_callback_is_raised_by_the_allocation():
    def broken(nbytes):
        raise RuntimeError("callback bug")

    fcb = mr.FailureCallbackResourceAdaptor(limited(256), broken)
    with pytest.raises(RuntimeError, match="callback bug"):
        fcb.allocate(1 << 20)
    p = fcb.allocate(128)  # nothing of it is left for the next call
    fcb.deallocate(p, 128)


def test_over_a_callback_resource_the_last_exception_wins():
    retried = []

    def callback(nbytes):
        if retried:
            raise KeyError("the failure callback gave up")
        retried.append(nbytes)
        return True

    def allocate(nbytes, stream):
        raise MemoryError("the allocate callback failed")

    fcb = mr.FailureCallbackResourceAdaptor(mr.CallbackMemoryResource(allocate, lambda p, n, s: None), callback)
    with pytest.raises(RuntimeError, match="the failure callback gave up"):
        fcb.allocate(256)
    assert retried == [256]


def test_over_a_callback_resource_a_false_passes_the_allocate_error():
    def allocate(nbytes, stream):
        raise MemoryError("Intentional allocation failure")

    fcb = mr.FailureCallbackResourceAdaptor(mr.CallbackMemoryResource(allocate, lambda p, n, s: None), lambda n: False)
    with pytest.raises(MemoryError, match="Intentional allocation failure"):
        fcb.allocate(256)


def test_the_callback_must_be_callable():
    with pytest.raises(TypeError, match="callable"):
        mr.FailureCallbackResourceAdaptor(limited(), "not callable")


def test_a_resource_that_outlives_its_python_object_keeps_its_callback():
    calls = []
    fcb = mr.FailureCallbackResourceAdaptor(limited(256), lambda n: calls.append(n) or False)
    above = mr.StatisticsResourceAdaptor(fcb)
    above._upstream = None  # only the C chain holds the failure_callback resource now
    from crmm.pylibrmm import memory_resource as mrmod

    parked = len(mrmod._orphaned_callbacks)
    del fcb
    gc.collect()
    assert len(mrmod._orphaned_callbacks) == parked + 1
    with pytest.raises(MemoryError):
        above.allocate(1 << 20)
    assert calls == [1 << 20]
    assert type(above.upstream_mr) is mr.FailureCallbackResourceAdaptor


def test_a_config_s_failure_callback_resource_has_the_class(tmp_path):
    from conftest import host_config, run_python

    path = host_config(tmp_path, "[resource.h]\nplugin = host\n[resource.f]\nplugin = failure_callback\nupstream = h\n")
    r = run_python(
        "import crmm.mr as mr\nf = mr.MemoryResource.from_config('f', device=0)\nassert type(f) is mr.FailureCallbackResourceAdaptor\nf.deallocate(f.allocate(8), 8)\nprint('ok')",
        env={"CRMM_CONFIG": path},
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


class _Made(Exception):
    """Stops a constructor at its plugin's creation, carrying the parameters it was given."""


def _async_export_flags(monkeypatch, **kwargs):
    """(enable_ipc, enable_fabric) as CudaAsyncMemoryResource(**kwargs) passes them to the async plugin."""

    def made(self, plugin, params, *args, **kw):
        raise _Made((params.get("enable_ipc"), params.get("enable_fabric")))

    monkeypatch.setattr(mr.MemoryResource, "__init__", made)
    with pytest.raises(_Made) as e:
        mr.CudaAsyncMemoryResource(**kwargs)
    return e.value.args[0]


@pytest.mark.parametrize("truthy", [1, "yes", [0]])
@pytest.mark.parametrize("flag,flags", [("enable_ipc", (True, False)), ("enable_fabric", (False, True))])
def test_async_export_options_are_read_by_their_truth_value_as_rmm_reads_them(monkeypatch, flag, flags, truthy):
    """RMM tests `if enable_ipc:`, so code written for it may pass 1: it means True, 0 False."""
    assert _async_export_flags(monkeypatch, **{flag: truthy}) == flags
    assert _async_export_flags(monkeypatch, **{flag: True}) == flags
    assert _async_export_flags(monkeypatch, **{flag: 0}) == (False, False)
    assert _async_export_flags(monkeypatch, **{flag: False}) == (False, False)


def test_async_export_options_together_are_refused_before_c(monkeypatch):
    """Both flags (RMM ORs them into one pool) are refused before the plugin is asked
    (docs/ipc.md says why)."""
    for ipc, fabric in [(True, True), (1, "yes")]:
        with pytest.raises(ValueError, match="not both"):
            _async_export_flags(monkeypatch, enable_ipc=ipc, enable_fabric=fabric)


def test_an_exception_a_pool_recovered_from_is_not_raised_by_a_later_call():
    """A pool that grows through a failure callback which raises, and then succeeds with a
    smaller growth, has recovered: the callback's exception is not the error of the thread's
    next failing call, which raises its own."""
    from crmm.pylibrmm.device_buffer import DeviceBuffer
    from test_device_buffer_alloc import HostAsDevice

    host = HostAsDevice()
    lim = mr.LimitingResourceAdaptor(host.mr, (3 << 20) + (1 << 19))
    calls = []

    def refuse(nbytes):
        calls.append(nbytes)
        raise KeyError(f"callback saw {nbytes}")

    for fails in (lambda: DeviceBuffer._uninitialized(16, mr=mr.HostMemoryResource()),
                  lambda: DeviceBuffer(size=16, mr=mr.HostMemoryResource())):
        pool = mr.MemoryResource("pool", {"initial_size": "0"}, upstream=mr.FailureCallbackResourceAdaptor(lim, refuse))
        first = pool.allocate(2 << 20)
        buf = DeviceBuffer._uninitialized(3 << 19, mr=pool)  # a growth refused (the callback raises), a smaller one not
        assert calls, "the callback was not called: the test's sizes no longer make the pool recover"
        calls.clear()
        with pytest.raises(crmm.InvalidArgumentError, match="device accessible"):
            fails()
        del buf
        pool.deallocate(first, 2 << 20)
        del pool
