"""Where code written for RMM matches RMM's exception messages or names, crmm gives the same
words: its own detail follows them."""

import pytest

import crmm
import crmm.mr as mr
import crmm.statistics as st
from crmm.pylibrmm.stream import Stream


def test_a_stream_of_none_is_refused_in_rmm_s_words():
    with pytest.raises(TypeError, match="stream argument cannot be None"):
        mr.HostMemoryResource().allocate(8, stream=None)


def test_another_stream_protocol_version_is_named():
    class V1Stream:
        def __cuda_stream__(self):
            return (1, 2)

    with pytest.raises(NotImplementedError, match="version: '1'"):
        Stream(V1Stream())


@pytest.mark.parametrize("bad", ["2k", "lots", "-1MiB"])
def test_an_unparsable_size_says_could_not_parse(bad):
    with pytest.raises(ValueError, match=f"Could not parse '{bad}' as a byte specification"):
        mr.PoolMemoryResource(mr.HostMemoryResource(), initial_pool_size=bad)


def test_an_initial_pool_above_its_maximum_is_refused_before_anything_runs():
    ran = []
    crmm.register_reinitialize_hook(ran.append, "hook")
    try:
        with pytest.raises(RuntimeError, match="Initial pool size exceeds the maximum pool size"):
            crmm.reinitialize(pool_allocator=True, initial_pool_size=1 << 11, maximum_pool_size=1 << 10)
        with pytest.raises(RuntimeError, match="Initial pool size exceeds the maximum pool size"):
            mr.PoolMemoryResource(mr.HostMemoryResource(), initial_pool_size="2KiB", maximum_pool_size="1KiB")
    finally:
        crmm.unregister_reinitialize_hook(ran.append)
    assert ran == []


def test_an_initial_pool_of_its_maximum_is_not_refused():
    pool = mr.PoolMemoryResource(mr.HostMemoryResource(), initial_pool_size=4096, maximum_pool_size="4KiB")
    assert pool.pool_size() == 4096


def test_profiler_records_have_rmm_s_names():
    records = st.ProfilerRecords()
    assert st.ProfilerRecords.MemoryRecord is st.ProfilerRecords.Data
    assert "No data" in records.report()
    records.add("f", st.Statistics(0, 0, 30, 1, 50, 2))
    assert records.records["f"] == st.ProfilerRecords.MemoryRecord(num_calls=1, memory_total=50, memory_peak=30)
    assert records.report(ordered_by="num_calls") == records.pretty_print(ordered_by="num_calls")


def test_a_logging_adaptor_without_a_name_takes_rmm_log_file(monkeypatch, tmp_path):
    path = tmp_path / "from-rmm-env.csv"
    monkeypatch.setenv("RMM_LOG_FILE", str(path))
    log = mr.LoggingResourceAdaptor(mr.HostMemoryResource())
    path = tmp_path / "from-rmm-env.dev0.csv"  # named as RMM names a file given by argument
    assert log.get_file_name() == str(path)
    log.deallocate(log.allocate(64), 64)
    log.flush()
    assert "Time,Action,Pointer,Size,Stream" in path.read_text()


def test_popping_the_base_counter_frame_is_an_index_error():
    stats = mr.StatisticsResourceAdaptor(mr.HostMemoryResource())
    with pytest.raises(IndexError, match="cannot pop the last counter pair") as info:
        stats.pop_counters()
    assert isinstance(info.value, crmm.CrmmError)
    stats.push_counters()
    stats.pop_counters()  # a pushed frame pops


def test_flags_with_an_existing_stream_are_refused_in_rmm_s_words():
    from crmm.pylibrmm.stream import DEFAULT_STREAM, CudaStreamFlags

    with pytest.raises(ValueError, match="flags may only be specified when obj is None"):
        Stream(DEFAULT_STREAM, flags=CudaStreamFlags.NON_BLOCKING)
