"""crmm.statistics without a device: the current device's resource is stood in for by a host
resource (the module reads and sets it through crmm.mr's functions), so the frames, the
context manager and the profiler are checked against real counts of the statistics plugin."""

import pytest

import crmm
import crmm.mr as mr
from crmm import statistics as st
from crmm.pylibrmm import memory_resource as mrmod


@pytest.fixture
def current(monkeypatch):
    """A settable stand-in for the current device's resource, starting as host memory."""
    slot = {"mr": mr.HostMemoryResource()}
    monkeypatch.setattr(mrmod, "get_current_device_resource", lambda: slot["mr"])

    def set_current(res):
        mrmod._mr_arg(res)
        slot["mr"] = res

    monkeypatch.setattr(mrmod, "set_current_device_resource", set_current)
    return slot


def alloc(n):
    res = mrmod.get_current_device_resource()
    return res, res.allocate(n), n


def free(a):
    res, p, n = a
    res.deallocate(p, n)


def test_statistics_are_off_until_enabled(current):
    assert st.get_statistics() is None
    assert st.push_statistics() is None
    assert st.pop_statistics() is None
    st.enable_statistics()
    res = current["mr"]
    assert type(res) is mr.StatisticsResourceAdaptor and type(res.upstream_mr) is mr.HostMemoryResource
    st.enable_statistics()
    assert current["mr"] is res, "enabling twice adds no second adaptor"
    a = alloc(1000)
    assert st.get_statistics() == st.Statistics(1000, 1, 1000, 1, 1000, 1)
    free(a)
    assert st.get_statistics() == st.Statistics(0, 0, 1000, 1, 1000, 1)


def test_frames_count_what_happens_inside_them(current):
    st.enable_statistics()
    a = alloc(100)
    before = st.push_statistics()
    assert before.current_bytes == 100
    b = alloc(50)
    c = alloc(30)
    free(c)
    inner = st.pop_statistics()
    assert inner == st.Statistics(current_bytes=50, current_count=1, peak_bytes=80, peak_count=2, total_bytes=80, total_count=2)
    outer = st.get_statistics()
    assert outer.current_bytes == 150 and outer.peak_bytes == 180 and outer.total_count == 3
    free(a)
    free(b)


def test_popping_the_base_frame_is_an_error(current):
    st.enable_statistics()
    with pytest.raises(crmm.CrmmError):
        st.pop_statistics()


def test_the_context_manager_adds_and_removes_the_adaptor(current):
    base = current["mr"]
    with st.statistics():
        assert isinstance(current["mr"], mr.StatisticsResourceAdaptor)
        a = alloc(64)
        assert st.get_statistics().current_bytes == 64
        free(a)
    assert current["mr"] is base


def test_the_context_manager_pushes_a_frame_when_statistics_are_on(current):
    st.enable_statistics()
    res = current["mr"]
    a = alloc(10)
    with st.statistics():
        assert st.get_statistics().total_bytes == 0
        b = alloc(20)
        assert st.get_statistics().total_bytes == 20
    assert current["mr"] is res
    assert st.get_statistics().total_bytes == 30
    free(a)
    free(b)


def test_changing_the_resource_inside_the_context_is_an_error(current):
    with pytest.raises(ValueError, match="changed"):
        with st.statistics():
            current["mr"] = mr.HostMemoryResource()


def test_the_profiler_records_functions_and_blocks(current):
    records = st.ProfilerRecords()
    st.enable_statistics()

    @st.profiler(records=records)
    def make(n):
        free(alloc(n))
        return n

    assert make(100) == 100 and make(300) == 300
    with st.profiler(records=records, name="block"):
        free(alloc(7))
    data = records.records
    (fname,) = [k for k in data if k != "block"]
    assert fname.endswith("(test_the_profiler_records_functions_and_blocks.<locals>.make)") and ".py:" in fname
    assert data[fname] == st.ProfilerRecords.Data(num_calls=2, memory_total=400, memory_peak=300)
    assert data["block"] == st.ProfilerRecords.Data(1, 7, 7)
    text = records.pretty_print(ordered_by="memory_total")
    rows = [line.split()[-1] for line in text.splitlines()[-2:]]
    assert rows == [fname.split()[-1], "block"]
    assert str(records) == records.pretty_print()


def test_the_profiler_records_a_call_that_raises_and_passes_the_exception_on(current):
    records = st.ProfilerRecords()
    st.enable_statistics()

    @st.profiler(records=records, name="fails")
    def fails():
        free(alloc(5))
        raise KeyError("boom")

    with pytest.raises(KeyError):
        fails()
    assert records.records["fails"].num_calls == 1


def test_the_profiler_does_nothing_while_statistics_are_off(current):
    records = st.ProfilerRecords()

    @st.profiler(records=records)
    def f():
        free(alloc(5))

    f()
    assert records.records == {}
    assert "No data" in records.pretty_print()


@pytest.mark.parametrize("kwargs,exc", [({"records": {}}, TypeError), ({"name": []}, TypeError)])
def test_profiler_argument_checks(kwargs, exc):
    with pytest.raises(exc):
        st.profiler(**kwargs)


@pytest.mark.parametrize("records,name,match", [
    ({}, "block", "records must be a ProfilerRecords"), (None, "block", "records must be a ProfilerRecords"),
    (st.ProfilerRecords(), [], "name must be hashable"), (st.ProfilerRecords(), {"a": 1}, "name must be hashable"),
])
def test_profiler_context_checks_its_arguments_when_made(records, name, match):
    """ProfilerContext(records, name) (crmm's public constructor of what profiler() returns;
    RMM's class takes no arguments) refuses what profiler() refuses, when it is made: a records object without add() failed only at the end of the first profiled block
    (an AttributeError, and only while statistics were on), a name of another type made records
    under that object; RMM takes any name a table takes as a key (an unhashable one fails there at
    the end of the first block)."""
    with pytest.raises(TypeError, match=match):
        st.ProfilerContext(records, name)


def test_a_profiler_name_of_another_type_is_a_key_as_in_rmm(current):
    """RMM records a block under any hashable name (a number, bytes, a tuple); so does crmm, and
    its report prints it."""
    records = st.ProfilerRecords()
    st.enable_statistics()
    for name in (3, b"block", ("layer", 2)):
        with st.ProfilerContext(records, name):
            pass
    assert set(records.records) == {3, b"block", ("layer", 2)}
    report = records.report()
    assert "3" in report and "b'block'" in report and "('layer', 2)" in report
    assert "No data" in st.ProfilerRecords().report(ordered_by="bogus")  # as RMM: nothing to sort


def test_profiler_context_takes_what_rmm_s_takes(current):
    """Any object with add() as records, and None as no name (a decorator then names the record
    after the function), as profiler() takes them."""
    seen = []

    class Mine:
        def add(self, name, data):
            seen.append(name)

    st.enable_statistics()
    st.ProfilerContext(Mine(), None)(_plain)()
    with st.ProfilerContext(Mine(), "block"):
        pass
    assert seen == [st._get_descriptive_name_of_object(_plain), "block"]
    with pytest.raises(ValueError, match="name"):
        with st.ProfilerContext(Mine(), None):
            pass


def test_a_profiler_block_needs_a_name(current):
    with pytest.raises(ValueError, match="name"):
        with st.profiler():
            pass


def test_pretty_print_refuses_an_unknown_order(current):
    """With records to sort (empty ones print "No data" whatever the order, as RMM's)."""
    records = st.ProfilerRecords()
    st.enable_statistics()
    with st.ProfilerContext(records, "block"):
        pass
    with pytest.raises(ValueError):
        records.pretty_print(ordered_by="size")


def test_adaptor_methods_on_a_host_chain():
    s = mr.StatisticsResourceAdaptor(mr.HostMemoryResource())
    p = s.allocate(10)
    assert s.allocation_counts == st.Statistics(10, 1, 10, 1, 10, 1)
    assert s.push_counters().current_bytes == 10
    assert s.allocation_counts.total_bytes == 0
    s.deallocate(p, 10)
    assert s.pop_counters().current_bytes == -10
    assert s.allocation_counts.current_bytes == 0
    assert crmm.statistics.default_profiler_records is st.default_profiler_records


def _plain():
    return 1


def test_descriptive_name_is_file_line_and_qualified_name():
    line = _plain.__code__.co_firstlineno
    assert st._get_descriptive_name_of_object(_plain) == f"{__file__}:{line}(_plain)"


def test_descriptive_name_sees_through_a_decorator_and_names_classes():
    import functools

    @functools.wraps(_plain)
    def wrapper():
        return _plain()

    line = _plain.__code__.co_firstlineno
    assert st._get_descriptive_name_of_object(wrapper) == f"{__file__}:{line}(_plain)"
    assert st._get_descriptive_name_of_object(Counted).endswith(f".py:{Counted.LINE}(Counted)")


def test_descriptive_name_of_an_object_without_source():
    assert st._get_descriptive_name_of_object(len) == "<unknown>:0(len)"


def test_the_profiler_names_a_function_record_by_the_descriptive_name(current):
    records = st.ProfilerRecords()
    st.enable_statistics()
    st.profiler(records=records)(_plain)()
    assert list(records.records) == [st._get_descriptive_name_of_object(_plain)]


class Counted:
    LINE = __import__("inspect").currentframe().f_lineno - 1


def test_a_profiler_named_none_is_unnamed_as_in_rmm(current):
    """RMM's profiler takes name=None as no name: a decorator names the record after the
    function, a block without a name is refused with ValueError (not a TypeError up front)."""
    records = st.ProfilerRecords()
    st.enable_statistics()
    st.profiler(records=records, name=None)(_plain)()
    assert list(records.records) == [st._get_descriptive_name_of_object(_plain)]
    with pytest.raises(ValueError, match="name"):
        with st.profiler(records=records, name=None):
            pass


def test_profiler_records_any_object_with_add_as_in_rmm(current):
    """RMM's profiler calls records.add(name=..., data=...) on whatever it is given."""

    class Mine:
        def __init__(self):
            self.seen = []

        def add(self, name, data):
            self.seen.append((name, data.total_bytes))

    mine = Mine()
    st.enable_statistics()
    with st.profiler(records=mine, name="block"):
        free(alloc(64))
    assert mine.seen == [("block", 64)]
