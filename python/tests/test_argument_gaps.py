"""Arguments that could change meaning on their way to C: a separator inside a parameter
value (read as a second parameter unless quoted: the value arrives whole), a NUL byte (a name
cut short), a pointer or size past 64 bits (truncated by ctypes). The last two are refused with a
Python exception before libcrmm sees them."""

import ctypes

import numpy as np
import pytest

import crmm
import crmm.mr as mr
from crmm.pylibrmm.memory_resource import params_string


@pytest.fixture
def host():
    return mr.HostMemoryResource()


@pytest.mark.parametrize("sep", [",", " ", "\t", "\n", "\r", "\v", "\f"])
def test_a_separator_in_a_value_cannot_inject_a_parameter(host, sep):
    # the value reaches the plugin whole (quoted), so it is one bad size, not two parameters
    with pytest.raises(crmm.ConfigError, match="initial_size"):
        mr.MemoryResource("pool", {"initial_size": f"1MiB{sep}maximum_size=2MiB"}, upstream=host)


def test_a_separator_in_a_class_argument_cannot_inject_a_parameter(host, tmp_path):
    name = tmp_path / "a.csv,auto_flush=true"
    log = mr.LoggingResourceAdaptor(host, log_file_name=str(name))
    written = tmp_path / "a.dev0.csv,auto_flush=true"  # RMM's ".dev<N>" before the "extension"
    assert log.get_file_name() == str(written)
    assert written.exists() and not (tmp_path / "a.dev0.csv").exists()


@pytest.mark.parametrize("name", ["my logs/a.csv", "a,b.csv", 'quote"d\\back.csv', '"lead.csv'])
def test_a_log_file_name_with_blanks_commas_and_quotes_is_kept_whole(host, tmp_path, name):
    path = tmp_path / name
    path.parent.mkdir(exist_ok=True)
    log = mr.LoggingResourceAdaptor(host, log_file_name=str(path))
    log.deallocate(log.allocate(64), 64)
    log.flush()
    written = path.with_name(path.stem + ".dev0" + path.suffix)
    assert log.get_file_name() == str(written)
    assert written.read_text().startswith("Thread,Time,Action,Pointer,Size,Stream")
    assert sorted(p.name for p in path.parent.iterdir()) == [written.name]


def test_a_nul_byte_in_a_value_is_refused(host):
    with pytest.raises(ValueError, match="NUL"):
        mr.MemoryResource("pool", {"initial_size": "1MiB\0junk"}, upstream=host)
    with pytest.raises(ValueError, match="NUL"):
        mr.MemoryResource("pool", "initial_size=1MiB\0 maximum_size=1", upstream=host)


@pytest.mark.parametrize("key,exc", [("Initial", ValueError), ("a=b", ValueError), ("", ValueError), ("a,b", ValueError), (3, TypeError)])
def test_parameter_names_are_checked(host, key, exc):
    with pytest.raises(exc):
        mr.MemoryResource("pool", {key: "1MiB"}, upstream=host)


@pytest.mark.parametrize("value", [[1], {"a": 1}, b"1MiB", object()])
def test_parameter_values_of_other_types_are_refused(host, value):
    with pytest.raises(TypeError, match="initial_size"):
        mr.MemoryResource("pool", {"initial_size": value}, upstream=host)


def test_parameter_values_that_are_numbers_and_flags_are_written_for_c():
    assert params_string({"a": 5, "b": True, "c": False, "d": 0.5, "e": None}) == "a=5 b=true c=false d=0.5"


def test_a_nul_byte_in_a_plugin_name_is_refused():
    with pytest.raises(ValueError, match="NUL"):
        mr.MemoryResource("host\0anything")


def test_a_plugin_name_must_be_text():
    with pytest.raises(TypeError):
        mr.MemoryResource(b"host")


def test_a_nul_byte_in_a_config_name_is_refused():
    with pytest.raises(ValueError, match="NUL"):
        mr.MemoryResource.from_config("main\0x", device=0)
    with pytest.raises(TypeError):
        mr.MemoryResource.from_config(b"main", device=0)


@pytest.mark.parametrize("path", ["a\0b", b"a\0b"])
def test_a_nul_byte_in_a_file_name_is_refused(path):
    with pytest.raises(ValueError, match="NUL"):
        crmm.initialize(path)
    with pytest.raises(ValueError, match="NUL"):
        crmm.enable_logging(path)


@pytest.mark.parametrize(
    "ptr,exc",
    [(2**70, OverflowError), (2**64, OverflowError), (-1, OverflowError), (1.5, TypeError), ("0", TypeError), (True, TypeError), (None, TypeError)],
)
def test_deallocate_refuses_pointers_that_are_not_addresses(host, ptr, exc):
    p = host.allocate(64)
    with pytest.raises(exc):
        host.deallocate(ptr, 64)
    host.deallocate(p, 64)


def test_a_huge_pointer_is_not_truncated_into_a_live_one():
    st = mr.StatisticsResourceAdaptor(mr.HostMemoryResource())
    p = st.allocate(64)
    with pytest.raises(OverflowError):
        st.deallocate(p + 2**64, 64)  # would be p itself after ctypes' truncation
    assert st.query("bytes_in_use") == 64
    st.deallocate(p, 64)
    assert st.query("bytes_in_use") == 0


@pytest.mark.parametrize("nbytes,exc", [(-1, ValueError), (2**64, OverflowError), (2**70, OverflowError), (1.0, TypeError), ("8", TypeError), (True, TypeError), (None, TypeError)])
def test_sizes_are_checked_before_c(host, nbytes, exc):
    with pytest.raises(exc):
        host.allocate(nbytes)
    p = host.allocate(8)
    with pytest.raises(exc):
        host.deallocate(p, nbytes)
    host.deallocate(p, 8)


def test_sizes_and_pointers_take_integer_like_objects(host):
    p = host.allocate(np.uint64(16))
    host.deallocate(np.uint64(p), np.int32(16))


@pytest.mark.parametrize(
    "make",
    [
        lambda h, v: mr.PoolMemoryResource(h, initial_pool_size=v),
        lambda h, v: mr.PoolMemoryResource(h, maximum_pool_size=v),
        lambda h, v: mr.LimitingResourceAdaptor(h, v),
        lambda h, v: mr.FixedSizeMemoryResource(h, block_size=v),
        lambda h, v: mr.ArenaMemoryResource(h, arena_size=v),
    ],
    ids=["pool_initial", "pool_maximum", "limit", "block_size", "arena_size"],
)
@pytest.mark.parametrize(
    "value,exc",
    [(-1, ValueError), (2**64, OverflowError), (1.5, TypeError), ([1], TypeError), ("junk", ValueError), ("-1MiB", ValueError), ("1MiB,x=1", ValueError), ("1\0", ValueError)],
)
def test_resource_size_arguments_are_checked_before_c(host, make, value, exc):
    with pytest.raises(exc):
        make(host, value)


def test_size_strings_are_read_as_rmm_reads_them(host):
    lim = mr.LimitingResourceAdaptor(host, "1.5KiB")
    p = lim.allocate(1536)
    with pytest.raises(MemoryError):
        lim.allocate(1)
    lim.deallocate(p, 1536)
    lim = mr.LimitingResourceAdaptor(host, "2kB")  # 2000 bytes, not 2048
    p = lim.allocate(1792)
    with pytest.raises(MemoryError):
        lim.allocate(256)
    lim.deallocate(p, 1792)


def test_no_reference_leaks_when_arguments_are_refused(host):
    from crmm._lib import lib

    before = lib.crmm_resource_refcount(host.ptr)
    for _ in range(3):
        with pytest.raises(ValueError):
            mr.PoolMemoryResource(host, initial_pool_size="1MiB,maximum_size=1")
        with pytest.raises(ValueError):
            mr.PoolMemoryResource(host, initial_pool_size=-1)
    assert lib.crmm_resource_refcount(host.ptr) == before

