"""Scan schedules: validation, next run times across time zones and DST, descriptions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from webapp.schedule import describe, next_runs, validate_schedule


def utc(*args: int) -> datetime:
    """A naive UTC datetime."""
    return datetime(*args)


@pytest.mark.parametrize(
    "schedule",
    [
        "@hourly",
        "@daily",
        "@weekly",
        "@DAILY",
        " 0 2 * * * ",
        "*/15 * * * *",
        "0 9 * * MON-FRI",
        "0 0 1 JAN,jul *",
        "30 4 1-7 * 1",
        "0 0 * * 7",
        "0 0 * * 0-7",
        "5/10 * * * *",
        "0 0 29 2 *",
        "0 8-18/2 * * 1,3,5",
    ],
)
def test_valid_schedules(schedule: str) -> None:
    assert validate_schedule(schedule) is None


@pytest.mark.parametrize(
    ("schedule", "fragment"),
    [
        ("", "5 fields"),
        ("* * * *", "5 fields"),
        ("0 0 * * * *", "5 fields"),  # no seconds field
        ("@monthly", "unknown preset"),
        ("60 * * * *", "minute: 60 is out of range 0-59"),
        ("* 24 * * *", "hour: 24 is out of range"),
        ("* * 0 * *", "day-of-month: 0 is out of range"),
        ("* * * 13 *", "month: 13 is out of range"),
        ("* * * * 8", "day-of-week: 8 is out of range"),
        ("*/0 * * * *", "step must be at least 1"),
        ("5-1 * * * *", "runs backwards"),
        ("0 0 L * *", "day-of-month: 'L' is not a valid value"),
        ("0 0 * * FOO", "day-of-week: 'FOO'"),
    ],
)
def test_invalid_schedules(schedule: str, fragment: str) -> None:
    message = validate_schedule(schedule)
    assert message is not None and fragment in message
    with pytest.raises(ValueError):
        next_runs(schedule, utc(2026, 1, 1), "UTC")


@pytest.mark.parametrize("schedule", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_schedule_that_never_runs(schedule: str) -> None:
    assert "never runs" in validate_schedule(schedule)
    assert next_runs(schedule, utc(2026, 1, 1), "UTC") == []


def test_non_string_is_invalid() -> None:
    assert validate_schedule(5) == "must be a string"


def test_sunday_is_zero_and_seven() -> None:
    after = utc(2026, 11, 18, 12)  # a Wednesday
    expected = [utc(2026, 11, 22, 2), utc(2026, 11, 29, 2)]
    assert next_runs("0 2 * * 0", after, "UTC", 2) == expected
    assert next_runs("0 2 * * 7", after, "UTC", 2) == expected
    assert next_runs("0 2 * * SUN", after, "UTC", 2) == expected
    assert next_runs("0 2 * * 5-7", after, "UTC", 3) == [
        utc(2026, 11, 20, 2),
        utc(2026, 11, 21, 2),
        utc(2026, 11, 22, 2),
    ]


def test_presets() -> None:
    after = utc(2026, 11, 18, 12, 30)
    assert next_runs("@hourly", after, "UTC", 2) == [utc(2026, 11, 18, 13), utc(2026, 11, 18, 14)]
    assert next_runs("@daily", after, "UTC", 2) == [utc(2026, 11, 19, 2), utc(2026, 11, 20, 2)]
    assert next_runs("@weekly", after, "UTC") == [utc(2026, 11, 22, 2)]


def test_next_run_is_strictly_after() -> None:
    assert next_runs("0 2 * * *", utc(2026, 1, 1, 2), "UTC") == [utc(2026, 1, 2, 2)]
    assert next_runs("* * * * *", utc(2026, 1, 1, 2, 0, 30), "UTC") == [utc(2026, 1, 1, 2, 1)]


def test_evaluated_in_time_zone_returned_in_utc() -> None:
    after = utc(2026, 6, 30, 12)
    assert next_runs("@daily", after, "Europe/Berlin") == [utc(2026, 7, 1, 0)]  # CEST +2
    assert next_runs("@daily", utc(2026, 1, 10), "Europe/Berlin") == [utc(2026, 1, 10, 1)]
    assert next_runs("0 9 * * *", utc(2026, 7, 1), "America/New_York") == [utc(2026, 7, 1, 13)]
    assert next_runs("0 9 * * *", utc(2026, 7, 1), "Asia/Kolkata") == [utc(2026, 7, 1, 3, 30)]
    # Monday 00:30 in Tokyo is still Sunday in UTC
    assert next_runs("30 0 * * MON", utc(2026, 11, 18), "Asia/Tokyo") == [utc(2026, 11, 22, 15, 30)]


def test_aware_after_is_accepted() -> None:
    after = datetime(2026, 11, 18, 12, tzinfo=UTC)
    assert next_runs("@daily", after, "UTC") == [utc(2026, 11, 19, 2)]


def test_unknown_time_zone() -> None:
    with pytest.raises(ValueError, match="unknown time zone"):
        next_runs("@daily", utc(2026, 1, 1), "Mars/Olympus")


def test_dst_spring_forward_skipped_time_runs_once_after_the_gap() -> None:
    # Berlin 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00 UTC)
    runs = next_runs("30 2 * * *", utc(2026, 3, 27, 12), "Europe/Berlin", 3)
    assert runs == [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 30), utc(2026, 3, 30, 0, 30)]


def test_dst_spring_forward_hourly_has_no_duplicate() -> None:
    runs = next_runs("0 * * * *", utc(2026, 3, 28, 23, 30), "Europe/Berlin", 4)
    assert runs == [utc(2026, 3, 29, 0), utc(2026, 3, 29, 1), utc(2026, 3, 29, 2), utc(2026, 3, 29, 3)]


def test_dst_fall_back_daily_runs_once() -> None:
    # Berlin 2026-10-25: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice
    runs = next_runs("30 2 * * *", utc(2026, 10, 24, 12), "Europe/Berlin", 2)
    assert runs == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


def test_dst_fall_back_hourly_stays_hourly() -> None:
    runs = next_runs("0 * * * *", utc(2026, 10, 24, 23, 30), "Europe/Berlin", 4)
    assert runs == [utc(2026, 10, 25, 0), utc(2026, 10, 25, 1), utc(2026, 10, 25, 2), utc(2026, 10, 25, 3)]


def test_dst_new_york() -> None:
    # 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST
    assert next_runs("0 2 * * *", utc(2026, 3, 7, 12), "America/New_York", 3) == [
        utc(2026, 3, 8, 7),
        utc(2026, 3, 9, 6),
        utc(2026, 3, 10, 6),
    ]
    assert next_runs("30 1 * * *", utc(2026, 10, 31, 12), "America/New_York", 2) == [
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 2, 6, 30),
    ]


def test_day_of_month_or_day_of_week() -> None:
    # both restricted: either matches (the 13th, or any Friday)
    runs = next_runs("0 0 13 * FRI", utc(2026, 11, 1), "UTC", 4)
    assert runs == [utc(2026, 11, 6), utc(2026, 11, 13), utc(2026, 11, 20), utc(2026, 11, 27)]
    # day-of-month `*`: both must match
    assert next_runs("0 0 * 12 FRI", utc(2026, 11, 1), "UTC") == [utc(2026, 12, 4)]


def test_rare_schedule_far_ahead() -> None:
    assert next_runs("0 0 29 2 *", utc(2026, 3, 1), "UTC", 2) == [utc(2028, 2, 29), utc(2032, 2, 29)]


def test_steps_and_lists() -> None:
    after = utc(2026, 11, 18, 10, 7)
    assert next_runs("*/15 * * * *", after, "UTC", 3) == [
        utc(2026, 11, 18, 10, 15),
        utc(2026, 11, 18, 10, 30),
        utc(2026, 11, 18, 10, 45),
    ]
    assert next_runs("5/20 * * * *", after, "UTC", 3) == [
        utc(2026, 11, 18, 10, 25),
        utc(2026, 11, 18, 10, 45),
        utc(2026, 11, 18, 11, 5),
    ]
    assert next_runs("0 0 1 JAN,JUL *", after, "UTC", 2) == [utc(2027, 1, 1), utc(2027, 7, 1)]


@pytest.mark.parametrize(
    ("schedule", "text"),
    [
        ("@daily", "Every day at 02:00"),
        ("0 2 * * *", "Every day at 02:00"),
        ("@hourly", "Every hour"),
        ("15 * * * *", "At minute 15 of every hour"),
        ("@weekly", "Sundays at 02:00"),
        ("0 2 * * 7", "Sundays at 02:00"),
        ("30 18 * * 1,3", "Mondays and Wednesdays at 18:30"),
        ("0 9 * * MON-FRI", "Monday to Friday at 09:00"),
        ("0 3 1 * *", "On day 1 of every month at 03:00"),
        ("0 */6 * * *", "cron: 0 */6 * * *"),
        ("0  0 29 2 *", "cron: 0 0 29 2 *"),
        (None, "Manual only"),
        ("nonsense", "Invalid schedule: nonsense"),
    ],
)
def test_describe(schedule: str | None, text: str) -> None:
    assert describe(schedule) == text
