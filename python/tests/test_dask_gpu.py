"""crmm.dask on a GPU: CRMMSetup's RMM-style pool and async setups in every worker of a
LocalCluster of processes, reported through the workers' metrics."""

import pytest

from test_dask import run_cluster

pytest.importorskip("distributed")

BODY = """
    out = client.run(lambda dask_worker: dask_worker.metrics["crmm"](dask_worker))
    rmm = client.run(lambda dask_worker: dask_worker.metrics["rmm"](dask_worker))
    print(json.dumps({"crmm": out, "rmm": rmm}))
"""


def test_a_pool_on_every_worker(gpu, tmp_path):
    out = run_cluster(BODY, tmp_path, {"pool_size": "64MiB", "statistics": True})
    assert "error" not in out, out
    assert len(out["crmm"]) == 2
    for metric in out["crmm"].values():
        assert metric["chain"] == "statistics -> pool -> cuda" and metric["device"] == 0
    for rmm in out["rmm"].values():
        assert rmm["rmm-total"] >= 64 << 20


def test_async_on_every_worker(gpu, tmp_path):
    out = run_cluster(BODY, tmp_path, {"async_": True, "pool_size": "64MiB"})
    assert "error" not in out, out
    for metric in out["crmm"].values():
        assert metric["chain"] == "async" and metric["device"] == 0
