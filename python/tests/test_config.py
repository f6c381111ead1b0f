"""The config chooses the resources: from_config, the error for a bad file, and initialize.
Each case runs in a fresh process, since a process loads its config once."""

from conftest import host_config, run_python


def test_resource_from_the_config(tmp_path):
    path = host_config(
        tmp_path,
        """
        [resource.h]
        plugin = host
        [resource.stats]
        plugin = statistics
        upstream = h
        """,
    )
    r = run_python(
        """
        import crmm
        s = crmm.mr.MemoryResource.from_config("stats", device=0)
        assert (s.kind, s.name) == ("statistics", "stats"), (s.kind, s.name)
        assert s.upstream_mr.name == "h"
        p = s.allocate(64)
        assert s.query("bytes_in_use") == 64
        s.deallocate(p, 64)
        assert crmm.is_initialized()
        try:
            crmm.mr.MemoryResource.from_config("nothing", device=0)
        except crmm.NotFoundError as e:
            print("not found:", e)
        """,
        env={"CRMM_CONFIG": path},
    )
    assert r.returncode == 0, r.stderr
    assert "not found:" in r.stdout and "nothing" in r.stdout


def test_bad_config_names_file_line_and_the_fix(tmp_path):
    path = host_config(tmp_path, "[resource.h]\nplugin = host\nbogus = 1\n")
    r = run_python(
        """
        import crmm
        try:
            crmm.mr.HostMemoryResource()
        except crmm.ConfigError as e:
            print(e)
        """,
        env={"CRMM_CONFIG": path},
    )
    assert r.returncode == 0, r.stderr
    assert f"{path}:3" in r.stdout
    assert "crmm check-config" in r.stdout


def test_initialize_loads_the_given_file(tmp_path):
    path = host_config(tmp_path, "[resource.mine]\nplugin = host\n")
    r = run_python(
        f"""
        import crmm
        assert not crmm.is_initialized()
        crmm.initialize({path!r})
        print(crmm.mr.MemoryResource.from_config("mine", device=0).kind)
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "host"
