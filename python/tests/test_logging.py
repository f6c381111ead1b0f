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


@pytest.mark.parametrize("level,exc", [(7, ValueError), (-1, ValueError), ("warn", TypeError), (None, TypeError)])
def test_bad_levels_are_refused(level, exc):
    with pytest.raises(exc):
        rmm.set_logging_level(level)
    with pytest.raises(exc):
        rmm.should_log(level)


def test_no_log_files_while_logging_is_off():
    assert rmm.get_log_filenames() == {}
    rmm.disable_logging()


def test_enable_logging_needs_a_file_name(monkeypatch):
    monkeypatch.delenv("CRMM_LOG_FILE", raising=False)
    with pytest.raises(ValueError, match="log_file_name"):
        rmm.enable_logging()
