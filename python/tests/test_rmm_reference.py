"""RMM's pylibrmm reference read literally by a user switching from RMM: what it documents
that crmm can be checked against without a device."""

import subprocess
import sys
import textwrap

from crmm.pylibrmm.stream import (
    DEFAULT_STREAM,
    LEGACY_DEFAULT_STREAM,
    PER_THREAD_DEFAULT_STREAM,
    Stream,
)


def test_is_default_is_the_legacy_default_stream_only():
    # RMM's Stream.is_default() is cuda_stream_view::is_default(): the legacy default stream
    # (handle 0 or cudaStreamLegacy); the per-thread default stream is not "the default stream"
    # (RMM is built without CUDA_API_PER_THREAD_DEFAULT_STREAM)
    assert DEFAULT_STREAM.is_default()
    assert LEGACY_DEFAULT_STREAM.is_default()
    assert Stream(0).is_default() and Stream(1).is_default()
    assert not PER_THREAD_DEFAULT_STREAM.is_default()
    assert not Stream(2).is_default()
    assert not Stream(PER_THREAD_DEFAULT_STREAM).is_default()
    assert "per-thread" in repr(PER_THREAD_DEFAULT_STREAM)


def _run(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)


def test_rmm_rmm_and_rmm_version_are_attributes_after_a_bare_import():
    # RMM's package imports rmm.rmm and rmm._version in its __init__ (from rmm.rmm import
    # reinitialize, ...; from rmm._version import __version__), so after `import rmm` alone
    # both are attributes of the package; docs/python.md names them as RMM's modules
    r = _run(
        """
        import crmm
        crmm.install_as_rmm()
        import rmm
        assert rmm.rmm.reinitialize is rmm.reinitialize
        assert rmm.rmm.RMMError is rmm.RMMError
        assert rmm._version.__version__ == rmm.__version__
        assert rmm._version.__git_commit__ == rmm.__git_commit__
        import crmm as c
        assert c.rmm.is_initialized is c.is_initialized
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_memory_resource_module_holds_every_class_as_rmm_s():
    # RMM defines all its resource classes in rmm.pylibrmm.memory_resource._memory_resource
    # (its .pyi lists them there; RMM's own tests import _flush_logs from it), the callback,
    # pool-view and system-memory classes included
    import crmm.pylibrmm.memory_resource as pkg
    from crmm.pylibrmm.memory_resource import _memory_resource

    for name in (
        "CallbackMemoryResource",
        "CudaAsyncViewMemoryResource",
        "SystemMemoryResource",
        "SamHeadroomMemoryResource",
    ):
        assert getattr(_memory_resource, name) is getattr(pkg, name)
    from crmm.pylibrmm.memory_resource._memory_resource import CallbackMemoryResource  # noqa: F401
