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
