"""crmm.statistics over the current device's real resource."""

import crmm
import crmm.mr as mr
from crmm import statistics as st


def test_device_buffers_are_counted_inside_the_block(gpu):
    before = mr.get_current_device_resource()
    with st.statistics():
        db = crmm.DeviceBuffer(size=1000)
        counts = st.get_statistics()
        assert counts.current_bytes == 1000 and counts.current_count == 1
        del db
        assert st.get_statistics().current_bytes == 0
    assert mr.get_current_device_resource() is before
    assert st.get_statistics() is None


def test_profiled_function_on_the_device(gpu):
    records = st.ProfilerRecords()
    before = mr.get_current_device_resource()
    st.enable_statistics()
    try:
        @st.profiler(records=records, name="two buffers")
        def two():
            a = crmm.DeviceBuffer(size=100)
            b = crmm.DeviceBuffer(size=200)
            return a.size + b.size

        assert two() == 300
        assert records.records["two buffers"] == st.ProfilerRecords.Data(1, 300, 300)
    finally:
        mr.set_current_device_resource(before)
