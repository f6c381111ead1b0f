"""The seed's logging functions: levels round-trip, bad levels are refused, the allocation-log
switch is off until enabled."""

import pytest

import crmm as rmm


def test_logging_level_round_trips():
    old = rmm.get_logging_level()
    try:
        rmm.set_logging_level(rmm.level_enum.error)
        assert rmm.get_logging_level() == rmm.level_enum.error
        assert rmm.should_log(rmm.level_enum.critical)
        assert not rmm.should_log(rmm.level_enum.warn)
    finally:
        rmm.set_logging_level(old)
    assert rmm.get_logging_level() == old


def test_flush_level_round_trips():
    old = rmm.get_flush_level()
    try:
        rmm.set_flush_level(rmm.level_enum.info)
        assert rmm.get_flush_level() == rmm.level_enum.info
        rmm.flush_logger()
    finally:
        rmm.set_flush_level(old)


@pytest.mark.parametrize("level", [7, -1, 2, True, "warn", None, 2.0])
def test_levels_other_than_level_enum_are_refused(level):
    """RMM takes level_enum members only: a plain int, even a valid one, is a TypeError."""
    old = rmm.get_logging_level()
    for fn in (rmm.set_logging_level, rmm.should_log, rmm.set_flush_level):
        with pytest.raises(TypeError, match="level_enum"):
            fn(level)
    assert rmm.get_logging_level() == old


def test_no_log_files_while_logging_is_off():
    # a device whose resource an earlier test read is listed, with None: it does not log
    assert all(name is None for name in rmm.get_log_filenames().values()), rmm.get_log_filenames()
    rmm.disable_logging()


def test_enable_logging_needs_a_file_name(monkeypatch):
    monkeypatch.delenv("CRMM_LOG_FILE", raising=False)
    monkeypatch.delenv("RMM_LOG_FILE", raising=False)
    with pytest.raises(ValueError, match="log_file_name"):
        rmm.enable_logging()
