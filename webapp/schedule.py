"""Scan schedules: 5-field cron and presets, evaluated in a time zone, returned in UTC.

Cron rules: fields minute, hour, day-of-month, month, day-of-week; `*`, lists, ranges,
steps (`*/15`, `1-5/2`, `10/5`), month and weekday names (JAN, MON); `0` and `7` are Sunday.
As in Vixie cron, when both day fields are restricted a day matches if either matches.
Presets: `@hourly` (minute 0), `@daily` (02:00), `@weekly` (Sunday 02:00).

Daylight saving time, in the schedule's zone:
- a wall time skipped when clocks go forward runs once, shifted forward by the gap
  (02:30 on a spring-forward night runs at 03:30 local time);
- a wall time that occurs twice when clocks go back runs once, at its first occurrence,
  unless the hour field is `*`, in which case it runs at both (an hourly job stays hourly).
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

PRESETS: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 2 * * *",
    "@weekly": "0 2 * * 0",
}

_MONTHS = {name.upper(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAYS = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
# (name, low, high, names) per field, in cron order
_FIELDS = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)
_HORIZON_DAYS = 366 * 9  # long enough for Feb 29 across a skipped leap year (2100)


@dataclass(frozen=True)
class CronSpec:
    """A parsed cron expression: the allowed values of each field."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day-of-month field starts with `*`
    any_weekday: bool  # day-of-week field starts with `*`
    any_hour: bool  # hour field is exactly `*`: repeated DST hours run twice

    def matches_day(self, day: date) -> bool:
        """True when the cron day rules (month, day-of-month / day-of-week) allow `day`."""
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow


def expand(schedule: str) -> str:
    """The 5-field cron form of a schedule (presets replaced, spaces normalized)."""
    text = schedule.strip()
    return PRESETS.get(text.lower(), " ".join(text.split()))


def parse(schedule: str) -> CronSpec:
    """Parse a cron expression or preset; raise ValueError with a message naming the field."""
    text = expand(schedule)
    if text.startswith("@"):
        raise ValueError(f"unknown preset '{schedule.strip()}': use @hourly, @daily or @weekly")
    parts = text.split()
    if len(parts) != 5:
        raise ValueError(
            "must be 5 fields (minute hour day-of-month month day-of-week) or one of @hourly, @daily, @weekly"
        )
    values = [_parse_field(part, *spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in values[4])
    return CronSpec(
        minutes=tuple(sorted(values[0])),
        hours=tuple(sorted(values[1])),
        days=frozenset(values[2]),
        months=frozenset(values[3]),
        weekdays=weekdays,
        any_day=parts[2].startswith("*"),
        any_weekday=parts[4].startswith("*"),
        any_hour=parts[1] == "*",
    )


def _parse_field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    """The set of values one cron field allows."""
    result: set[int] = set()
    for item in text.split(","):
        spec, _, step_text = item.partition("/")
        step = _number(step_text, name, names={}) if step_text else 1
        if step_text and step < 1:
            raise ValueError(f"{name}: step must be at least 1")
        if spec == "*":
            first, last = low, high
        elif "-" in spec:
            start, _, end = spec.partition("-")
            first, last = _number(start, name, names), _number(end, name, names)
        else:
            first = _number(spec, name, names)
            last = high if step_text else first  # `10/5` means 10-max/5
        for value in (first, last):
            if not low <= value <= high:
                raise ValueError(f"{name}: {value} is out of range {low}-{high}")
        if first > last:
            raise ValueError(f"{name}: range {first}-{last} runs backwards")
        result.update(range(first, last + 1, step))
    return result


def _number(text: str, field_name: str, names: dict[str, int]) -> int:
    """One field value: a decimal number or a name (JAN, MON)."""
    if text.isascii() and text.isdigit():
        return int(text)
    if text.upper() in names:
        return names[text.upper()]
    raise ValueError(f"{field_name}: '{text}' is not a valid value")


def _zone(tz: str) -> ZoneInfo:
    """The IANA time zone `tz`; ValueError when unknown."""
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone '{tz}'") from exc


def validate_schedule(schedule: object) -> str | None:
    """Return why `schedule` is not a valid cron expression or preset, or None when it is."""
    if not isinstance(schedule, str):
        return "must be a string"
    try:
        spec = parse(schedule)
    except ValueError as exc:
        return str(exc)
    if not _day_candidates(spec, date(2000, 1, 1), limit=1):
        return "never runs: no date matches the day and month fields"
    return None


def _day_candidates(spec: CronSpec, start: date, limit: int) -> list[date]:
    """Up to `limit` days from `start` on that the schedule runs, within the horizon."""
    found: list[date] = []
    day = start
    for _ in range(_HORIZON_DAYS):
        if spec.matches_day(day):
            found.append(day)
            if len(found) >= limit:
                break
        day += timedelta(days=1)
    return found


def _day_instants(spec: CronSpec, day: date, zone: ZoneInfo) -> list[datetime]:
    """Sorted, distinct UTC instants (aware) at which the schedule runs on local `day`."""
    instants: set[datetime] = set()
    for hour in spec.hours:
        for minute in spec.minutes:
            wall = datetime.combine(day, time(hour, minute))
            first = wall.replace(tzinfo=zone).astimezone(UTC)
            second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
            if first == second:
                instants.add(first)
            elif first.astimezone(zone).replace(tzinfo=None) == wall:  # repeated wall time
                instants.add(first)
                if spec.any_hour:
                    instants.add(second)
            else:  # skipped wall time: fold=0 lands after the gap
                instants.add(max(first, second))
    return sorted(instants)


def next_runs(schedule: str, after: datetime, tz: str = "UTC", n: int = 1) -> list[datetime]:
    """The next `n` run times strictly after `after` (naive UTC), as naive UTC datetimes.

    The schedule is evaluated in time zone `tz`. Fewer than `n` (or none) are returned only
    if the schedule does not run within about nine years. Raises ValueError when invalid.
    """
    spec = parse(schedule)
    zone = _zone(tz)
    start = after.astimezone(UTC) if after.tzinfo else after.replace(tzinfo=UTC)
    # a day earlier: zones whose clocks go back over midnight repeat the previous local date
    day = start.astimezone(zone).date() - timedelta(days=1)
    runs: list[datetime] = []
    while len(runs) < n:
        days = _day_candidates(spec, day, limit=1)
        if not days:
            break
        for instant in _day_instants(spec, days[0], zone):
            if instant > start and len(runs) < n and (not runs or instant > runs[-1]):
                runs.append(instant)
        day = days[0] + timedelta(days=1)
    return [run.replace(tzinfo=None) for run in runs]


def next_scan(schedule: str | None, after: datetime, tz: str = "UTC") -> datetime | None:
    """The next run of a source's schedule after `after` (naive UTC), or None when manual."""
    if not schedule:
        return None
    return next_runs(schedule, after, tz, 1)[0]


def _english(message: str, **values: str) -> str:
    return message % values if values else message


def describe(schedule: str | None, _: Callable[..., str] = _english) -> str:
    """A short human-readable description, e.g. "Every day at 02:00" or "cron: 0 */6 * * *".

    `_` translates the phrases (the UI passes Flask-Babel's gettext; the phrases are in its
    catalogue); without it they are English."""
    if schedule is None or not schedule.strip():
        return _("Manual only")
    text = expand(schedule)
    parts = text.split()
    try:
        spec = parse(text)
    except ValueError:
        return _("Invalid schedule: %(schedule)s", schedule=schedule)
    minute, hour, dom, month, dow = parts
    fixed_time = len(spec.minutes) == 1 and len(spec.hours) == 1 and minute.isdigit()
    at = f"{spec.hours[0]:02d}:{spec.minutes[0]:02d}" if fixed_time and hour.isdigit() else ""
    if minute.isdigit() and (hour, dom, month, dow) == ("*", "*", "*", "*"):
        if spec.minutes[0] == 0:
            return _("Every hour")
        return _("At minute %(minute)s of every hour", minute=minute)
    if at and (dom, month, dow) == ("*", "*", "*"):
        return _("Every day at %(time)s", time=at)
    if at and (dom, month) == ("*", "*") and dow != "*":
        if spec.weekdays == frozenset(range(1, 6)):
            return _("Monday to Friday at %(time)s", time=at)
        plurals = (
            _("Sundays"), _("Mondays"), _("Tuesdays"), _("Wednesdays"), _("Thursdays"), _("Fridays"),
            _("Saturdays"),
        )  # fmt: skip
        names = [plurals[d] for d in sorted(spec.weekdays)]
        if len(names) == 1:
            return _("%(days)s at %(time)s", days=names[0], time=at)
        joined = _("%(days)s and %(last)s", days=", ".join(names[:-1]), last=names[-1])
        return _("%(days)s at %(time)s", days=joined, time=at)
    if at and dom.isdigit() and (month, dow) == ("*", "*"):
        return _("On day %(day)s of every month at %(time)s", day=dom, time=at)
    return _("cron: %(expression)s", expression=text)
