"""crmm.dask: CRMMSetup sets crmm up in every worker of a LocalCluster of processes, and the
workers report their resource and distributed's RMM metrics; a broken config fails the
registration with the config's message. Each cluster runs in a fresh interpreter under a time
limit, closed in `finally`, so that nothing hangs. Skips only without distributed."""

import json
import os
import textwrap

import pytest

distributed = pytest.importorskip("distributed")

import crmm._lib as _lib  # noqa: E402
from conftest import run_python  # noqa: E402

from crmm.dask import CRMMSetup, config_text  # noqa: E402

HOST_CONFIG = """\
[crmm]
default = p
[resource.h]
plugin = host
[resource.p]
plugin = pool
upstream = h
initial_size = 1MiB
"""
CLUSTER_TIMEOUT = 300


def run_cluster(body, tmp_path, setup_args, good_config=None):
    """Run `body` (code using `client`, printing one JSON line) with CRMMSetup(**setup_args)
    registered on a 2-worker LocalCluster of processes (good_config: the text of the config
    file setup_args names); returns the JSON the body printed, or the registration's error."""
    if good_config is not None:
        with open(setup_args["config"], "w") as f:
            f.write(good_config)
    code = f"""
import json, sys, time
from distributed import Client, LocalCluster
from crmm.dask import CRMMSetup
cluster = client = None
try:
    cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                           local_directory={str(tmp_path)!r})
    client = Client(cluster, timeout="60s")
    try:
        client.register_worker_plugin(CRMMSetup(**{setup_args!r}))
    except Exception as e:
        print(json.dumps({{"error": type(e).__name__, "message": str(e)}}))
        sys.exit(0)
{textwrap.indent(textwrap.dedent(body), "    ")}
finally:
    if client is not None:
        client.close(timeout=30)
    if cluster is not None:
        cluster.close(timeout=30)
"""
    # distributed before 2023.2 calls .decode() on what newer pynvml returns as str, and its
    # cluster then fails to start on a machine with a GPU (dask/distributed #7584): its own
    # NVML diagnostics are switched off, crmm's metrics need none of them.
    done = run_python(code, env={"DASK_DISTRIBUTED__DIAGNOSTICS__NVML": "False"}, timeout=CLUSTER_TIMEOUT)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_worker_runs_the_host_config_and_reports_it(tmp_path):
    config = tmp_path / "host.ini"
    config.write_text(HOST_CONFIG)
    out = run_cluster("""
        def hold(dask_worker):
            import crmm.mr
            mr = crmm.mr.MemoryResource.from_config("p", device=-1)
            dask_worker._crmm_test_hold = (mr, mr.allocate(4096))
            return dask_worker.metrics["rmm"](dask_worker)
        held = client.run(hold)
        direct = client.run(lambda dask_worker: dask_worker.metrics["crmm"](dask_worker))
        # the scheduler has them once every worker's heartbeat brought them (bounded wait)
        deadline = time.monotonic() + 60
        while True:
            workers = client.scheduler_info()["workers"]
            seen = {a: w["metrics"].get("rmm") for a, w in workers.items()}
            if all(m and m["rmm-used"] >= 4096 for m in seen.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        print(json.dumps({"held": held, "direct": direct, "scheduler": seen,
                          "crmm": {a: w["metrics"].get("crmm") for a, w in workers.items()}}))
    """, tmp_path, {"config": str(config)})
    assert "error" not in out, out
    assert len(out["direct"]) == 2
    # a worker with a GPU sets the config's resource on its device (0); without one, on the host (-1)
    device = 0 if _lib.device_count() > 0 else -1
    for metric in out["direct"].values():
        assert metric["kind"] == "pool" and metric["name"] == "p"
        assert metric["chain"] == "pool -> host" and metric["device"] == device
        assert metric["bytes_reserved"] == 1 << 20
    for rmm in out["held"].values():
        assert rmm == {"rmm-used": 4096, "rmm-total": 1 << 20}
    assert len(out["scheduler"]) == 2
    for rmm in out["scheduler"].values():
        assert rmm == {"rmm-used": 4096, "rmm-total": 1 << 20}
    for metric in out["crmm"].values():
        assert metric["chain"] == "pool -> host" and metric["bytes_in_use"] == 4096


def test_bad_setups_fail_the_registration_with_their_message(tmp_path):
    broken = tmp_path / "broken.ini"
    broken.write_text("[resource.p]\nplugin = pool\nupstream = nosuch\n")
    missing = tmp_path / "missing.ini"
    setups = {"broken": {"config": str(broken)}, "missing": {"config": str(missing)}}
    if _lib.device_count() == 0:
        setups["no_device"] = {"pool_size": "1MiB"}
    out = run_cluster(f"""
        errors = {{}}
        for label, args in {setups!r}.items():
            try:
                client.register_worker_plugin(CRMMSetup(**args))
                errors[label] = None
            except Exception as e:
                errors[label] = [type(e).__name__, str(e)]
        print(json.dumps(errors))
    """, tmp_path, {"config": str(tmp_path / "good.ini")}, good_config=HOST_CONFIG)
    assert out["broken"][0] == "ConfigError", out
    assert f"{broken}:3" in out["broken"][1] and "nosuch" in out["broken"][1], out
    assert out["missing"] and str(missing) in out["missing"][1], out
    if "no_device" in setups:
        assert out["no_device"] and out["no_device"][0] == "CudaError", out


def load_config(tmp_path, text):
    path = tmp_path / "generated.ini"
    path.write_text(text)
    cfg = _lib.ctypes.c_void_p()
    status = _lib.lib.crmm_config_load_file(os.fsencode(path), _lib.ctypes.byref(cfg))
    assert status == 0, _lib.text(_lib.lib.crmm_last_error())
    chain = []
    name = _lib.text(_lib.lib.crmm_config_default_resource(cfg, -1))
    while name:
        i = [_lib.text(_lib.lib.crmm_config_resource_name(cfg, k))
             for k in range(_lib.lib.crmm_config_resource_count(cfg))].index(name)
        chain.append(_lib.text(_lib.lib.crmm_config_resource_plugin(cfg, i)))
        name = _lib.text(_lib.lib.crmm_config_resource_upstream(cfg, i))
    _lib.lib.crmm_config_free(cfg)
    return chain


@pytest.mark.parametrize("options, chain", [
    ({}, ["cuda"]),
    ({"pool_size": "1GiB"}, ["pool", "cuda"]),
    ({"pool_size": 1 << 30, "maximum_pool_size": "2GiB", "managed": True}, ["pool", "managed"]),
    ({"async_": True, "pool_size": "1GiB", "release_threshold": "512MiB"}, ["async"]),
    ({"async_": True, "maximum_pool_size": "1GiB"}, ["limiting", "async"]),
    ({"pool_size": "1GiB", "tracking": True, "statistics": True, "log_file": "/tmp/x.csv"},
     ["logging", "tracking", "statistics", "pool", "cuda"]),
])
def test_rmm_style_options_make_a_valid_config(tmp_path, options, chain):
    assert load_config(tmp_path, config_text(**options)) == chain


@pytest.mark.parametrize("kwargs, message", [
    ({"config": "x.ini", "pool_size": "1GiB"}, "config= names the whole setup"),
    ({"maximum_pool_size": "1GiB"}, "maximum_pool_size needs pool_size"),
    ({"async_": True, "managed": True}, "managed memory cannot come from the async resource"),
    ({"release_threshold": "1GiB"}, "release_threshold needs async_=True"),
    ({"device": -1}, "device must be an ordinal"),
    ({"pool_size": 0}, "pool_size must be > 0"),
    ({"pool_size": "1 GiB\n[resource.x]"}, "is not a size"),
])
def test_bad_options_are_refused_at_once(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CRMMSetup(**kwargs)


def test_a_size_of_another_type_is_refused():
    with pytest.raises(TypeError, match="pool_size must be a number of bytes"):
        CRMMSetup(pool_size=1.5)


def test_a_log_directory_with_a_percent_is_a_path_not_a_pattern(tmp_path):
    """The config's logging plugin reads %p and %d in `file` as the process and device: a
    directory whose name holds them is written with %% so that the log lands in it."""
    class Worker:
        name = "w0"
        local_directory = str(tmp_path)

    setup = CRMMSetup(log_directory=tmp_path / "pct%p%d")
    text = open(setup._config_path(Worker())).read()
    expected = os.path.join(str(tmp_path), "pct%%p%%d", "crmm_log_w0.csv")
    assert f"file = {expected}" in text


def test_metrics_follow_a_replaced_device_resource_and_let_the_old_one_go(tmp_path, monkeypatch):
    """A worker with a GPU (stood in for: one device whose resource the test sets) that
    replaces its device's resource (crmm.reinitialize, say): the metrics report the new one, as
    distributed's RMM metric does, and the setup no longer holds the old one, whose pool kept
    its memory while it did."""
    import gc
    import weakref

    import crmm.dask as cd
    import crmm.mr as mr

    def pool():
        return mr.MemoryResource("pool", {"initial_size": "0"}, upstream=mr.HostMemoryResource())

    resources = {0: pool()}
    monkeypatch.setattr(_lib, "initialize", lambda path: None)  # this process's config stays
    monkeypatch.setattr(_lib, "device_count", lambda: 1)
    monkeypatch.setattr(cd, "get_per_device_resource", lambda device: resources[device])
    monkeypatch.setattr(cd, "_set_config_resource", lambda device: None)  # the test sets it

    class Worker:
        name = "w0"
        local_directory = str(tmp_path)

        def __init__(self):
            self.metrics = {}

    worker = Worker()
    setup = CRMMSetup(config=tmp_path / "crmm.ini")
    setup.setup(worker)
    old = weakref.ref(resources[0])
    resources[0] = new = pool()
    block = new.allocate(1000)
    assert worker.metrics["rmm"](worker)["rmm-used"] == 1000
    assert worker.metrics["crmm"](worker)["bytes_in_use"] == 1000
    assert setup.resource is new
    gc.collect()
    assert old() is None, "the setup keeps the replaced resource"
    new.deallocate(block, 1000)
    setup.teardown(worker)
    assert setup.resource is None and worker.metrics == {}


@pytest.mark.parametrize("kwargs, message", [
    ({"maximum_pool_size": "1GiB"}, "maximum_pool_size needs pool_size"),
    ({"async_": True, "managed": True}, "managed memory cannot come from the async resource"),
    ({"release_threshold": "1GiB"}, "release_threshold needs async_=True"),
])
def test_config_text_refuses_options_it_would_leave_out(kwargs, message):
    """config_text wrote a config without the option (no limit, no managed memory, no
    threshold) where CRMMSetup refused it."""
    with pytest.raises(ValueError, match=message):
        config_text(**kwargs)


@pytest.mark.parametrize("flag, bad", [("async_", "false"), ("managed", "no"), ("tracking", 1), ("statistics", None)])
def test_a_switch_that_is_not_a_bool_is_refused(flag, bad):
    """crmm's own options: a string such as "false" (true as a truth value) chose the async
    resource, managed memory or an adaptor; it is a TypeError naming the option."""
    with pytest.raises(TypeError, match=f"{flag} must be a bool, not {type(bad).__name__}"):
        config_text(**{flag: bad})
    with pytest.raises(TypeError, match=f"{flag} must be a bool"):
        CRMMSetup(**{flag: bad})


def test_a_new_setup_replaces_the_device_resource_a_worker_already_has(tmp_path):
    """A worker whose device already has its resource (a CRMMSetup registered before, replaced by
    a new one of the same name; or crmm used before the registration) takes the new setup's
    config: crmm_init alone changes only devices whose resource is not yet made, so the worker
    kept the old resource and reported it, and the new options were lost without a word. A GPU
    worker is stood in for in a fresh interpreter: one device, configs over host memory."""
    pool = tmp_path / "pool.ini"
    pool.write_text(HOST_CONFIG)
    host = tmp_path / "host.ini"
    host.write_text("[crmm]\ndefault = h\n[resource.h]\nplugin = host\n")
    r = run_python(f"""
        import crmm._lib as _lib
        _lib.device_count = lambda: 1
        from crmm.dask import CRMMSetup
        from crmm.pylibrmm.memory_resource import get_per_device_resource

        class Worker:
            name = "w0"
            local_directory = {str(tmp_path)!r}

            def __init__(self):
                self.metrics = {{}}

        worker = Worker()
        _lib.initialize({str(host)!r})
        assert get_per_device_resource(0).kind == "host"  # made before any setup
        first = CRMMSetup(config={str(pool)!r})
        first.setup(worker)
        print(first.resource.kind, get_per_device_resource(0).kind, worker.metrics["crmm"](worker)["chain"])
        first.teardown(worker)
        second = CRMMSetup(config={str(host)!r})
        second.setup(worker)
        print(second.resource.kind, get_per_device_resource(0).kind, worker.metrics["crmm"](worker)["chain"])
        """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split("\n")[:2] == ["pool pool pool -> host", "host host host"], r.stdout


def test_a_log_directory_with_a_hash_or_semicolon_is_written_as_it_is(tmp_path):
    """The config reads '#' and ';' inside a value as part of it (only a ';' after a blank starts
    a comment): a directory named "run#1" or "a;b" is a path the logging plugin writes into,
    where the setup refused it on every worker. What the config would cut is refused by the
    constructor, not later on each worker."""
    class Worker:
        name = "w0"
        local_directory = str(tmp_path)

    for name in ("run#1", "a;b", "x #y"):
        setup = CRMMSetup(log_directory=tmp_path / name)
        expected = os.path.join(str(tmp_path), name, "crmm_log_w0.csv")
        text = open(setup._config_path(Worker())).read()
        path = tmp_path / "generated.ini"
        path.write_text(text)
        cfg = _lib.ctypes.c_void_p()
        assert _lib.lib.crmm_config_load_file(os.fsencode(path), _lib.ctypes.byref(cfg)) == 0, _lib.last_error()
        fn = _lib.lib.crmm_config_resource_param_value
        fn.restype, fn.argtypes = _lib.ctypes.c_char_p, [_lib.ctypes.c_void_p, _lib.ctypes.c_size_t, _lib.ctypes.c_size_t]
        i = _lib.lib.crmm_config_find_resource(cfg, b"log")
        assert i >= 0
        values = [fn(cfg, i, j).decode() for j in range(_lib.lib.crmm_config_resource_param_count(cfg, i))]
        _lib.lib.crmm_config_free(cfg)
        assert expected in values, (name, values)
    for bad in ("a ;b", "a\nb"):
        with pytest.raises(ValueError, match="cannot be written into a config"):
            CRMMSetup(log_directory=tmp_path / bad)
