"""Scans from the shell: queue one and follow it, the latest that ended, a source's failures."""

from __future__ import annotations

import sys
import time

import click
from flask.cli import with_appcontext
from tqdm import tqdm

from webapp.cli.common import JSON_OPTION, fail, needs_data, needs_trawl, print_json
from webapp.exceptions import TrawlError
from webapp.indexing.runstats import RunStats
from webapp.runtime import get_queue, worker_count
from webapp.services import scans, status


@click.command("jobs")
@with_appcontext
@JSON_OPTION
@click.option("--limit", default=20, type=click.IntRange(1, 100), help="Scans to show.")
@needs_data
def jobs(as_json: bool, limit: int) -> None:
    """The latest scans that ended: outcome, duration and counts (the status page's Jobs)."""
    runs = status.recent_runs(None, limit)
    if as_json:
        print_json(runs)
        return
    for r in runs:
        took = f"{r['duration_seconds']:.0f} s" if r["duration_seconds"] is not None else "-"
        click.echo(
            f"{r['finished_at']}  {r['source_id']:<20} {r['state']:<11} {took:>7}  "
            f"{r['total_scanned']} seen, {r['new_files']} new, {r['modified_files']} "
            f"changed, {r['deleted_files']} removed, {r['failed']} failed"
        )


def _follow(source_id: str, show_bar: bool) -> RunStats:
    """Poll the run's stats until it ends; a progress bar only on a terminal."""
    with tqdm(total=0, unit="file", desc=source_id, disable=not show_bar) as bar:
        while True:
            stats = scans.live_stats(source_id) or RunStats()
            bar.total, bar.n = stats.progress.total, stats.progress.done
            bar.set_postfix(state=stats.state, failed=stats.failed)
            bar.refresh()
            if stats.final:
                return stats
            time.sleep(0.5)


@click.command("scan")
@with_appcontext
@click.argument("source_id")
@click.option("--full", is_flag=True, help="Rebuild every file.")
@click.option("--no-wait", is_flag=True, help="Queue the scan and return at once.")
@JSON_OPTION
@needs_trawl
def scan(source_id: str, full: bool, no_wait: bool, as_json: bool) -> None:
    """Queue a scan and follow it to its end; exit status 1 when files failed, 2 when the scan
    did not finish."""
    if not no_wait and worker_count(get_queue()) == 0:
        fail(
            "no worker is running, so the scan would never start. Start Trawl with "
            "`make run` (or `python worker.py`), or pass --no-wait to only queue it."
        )
    try:
        started = scans.request_scan(source_id, full=full)
    except TrawlError as exc:
        fail(exc)
    if no_wait:
        if as_json:
            print_json({"message": started["message"], "job_id": started["job_id"]})
        else:
            click.echo(started["message"])
        return
    if not as_json:
        click.echo(started["message"], err=True)
    stats = _follow(source_id, show_bar=sys.stderr.isatty() and not as_json)
    _report(source_id, stats, as_json)


def _report(source_id: str, stats: RunStats, as_json: bool) -> None:
    """Print how the scan ended and exit 2 when it did not finish, 1 when files failed."""
    if as_json:
        print_json({k: v for k, v in stats.to_dict().items() if k != "errors"})
    else:
        click.echo(
            f"Scan {stats.state}: {stats.total_scanned} seen, {stats.new_files} new, "
            f"{stats.modified_files} changed, {stats.deleted_files} removed, "
            f"{stats.failed} failed" + (f" ({stats.message})" if stats.message else "")
        )
    if stats.state != "finished":
        sys.exit(2)
    if stats.failed:
        fail(
            f"{stats.failed} file{'' if stats.failed == 1 else 's'} failed; see "
            f"/sources/{source_id}/failed or `trawl failed {source_id}`"
        )


@click.command("failed")
@with_appcontext
@click.argument("source_id")
@click.option("--page", default=1, type=click.IntRange(1), help="Page of 50 files.")
@JSON_OPTION
@needs_data
def failed(source_id: str, page: int, as_json: bool) -> None:
    """The source's failed files, grouped by error message."""
    try:
        info = status.failed_files(source_id, page, None)
    except TrawlError as exc:
        fail(exc)
    if as_json:
        print_json(info)
        return
    click.echo(f"{info['total']} failed files (page {info['page']} of {info['pages']})")
    for group in info["groups"]:
        click.echo(f"\n{group['message'] or '(no message)'}  [{group['count']}]")
        for path in group["paths"]:
            click.echo(f"  {path}")
