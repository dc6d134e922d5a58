"""First-run setup, login and logout pages (session cookie; the API keeps bearer tokens), and
your account: password and API tokens."""

from __future__ import annotations

from flask import flash, g, redirect, render_template, request, url_for

from webapp import ratelimits
from webapp.exceptions import TrawlError
from webapp.services import auth, tokens
from webapp.ui import session
from webapp.ui.blueprint import bp


def _after_login() -> str:
    return session.safe_next(request.values.get("next")) or url_for("ui.index")


@bp.route("/setup", methods=["GET", "POST"])
@ratelimits.per_address  # the same budgets as POST /api/auth/setup and /api/auth/login
def setup():
    """Create the first admin account (only while no account exists), then log it in."""
    if not auth.setup_required():
        return redirect(url_for("ui.index") if g.user else url_for("ui.login"))
    form = {"username": request.form.get("username", "").strip()}
    if request.method == "GET":
        return render_template("setup.html", form=form, error=None)
    password = request.form.get("password", "")
    error = None
    if password != request.form.get("password_confirm", ""):
        error = "password: the two passwords do not match"
    else:
        try:
            user = auth.setup(form["username"], password)
        except TrawlError as exc:
            error = exc.detail
    if error:
        return render_template("setup.html", form=form, error=error), 400
    session.login(user)
    flash(f"Welcome, {user.username}. Add a folder to index to get started.", "success")
    return redirect(url_for("ui.source_new"))


@bp.route("/login", methods=["GET", "POST"])
@ratelimits.per_address
@ratelimits.per_username
def login():
    """The login form; a wrong name or password re-shows it with one message for both."""
    if auth.setup_required():
        return redirect(url_for("ui.setup"))
    nxt = session.safe_next(request.values.get("next"))
    form = {"username": request.form.get("username", "").strip()}
    if request.method == "GET":
        if g.user:
            return redirect(nxt or url_for("ui.index"))
        return render_template("login.html", form=form, next=nxt, error=None)
    try:
        user = auth.authenticate(form["username"], request.form.get("password", ""))
    except TrawlError as exc:
        return render_template("login.html", form=form, next=nxt, error=exc.detail), exc.status
    session.login(user)
    return redirect(_after_login())


@bp.post("/logout")
def logout():
    """End the session (POST with the CSRF token, so no other site can log you out)."""
    session.logout()
    flash("You have been logged out.", "info")
    return redirect(url_for("ui.login"))


@bp.route("/account", methods=["GET", "POST"])
def account():
    """Your account: change the password (every other session and token of it ends)."""
    error, status_code = None, 200
    if request.method == "POST":
        new = request.form.get("new_password", "")
        if new != request.form.get("new_password_confirm", ""):
            error, status_code = "new_password: the two passwords do not match", 400
        else:
            try:
                auth.change_own_password(g.user, request.form.get("current_password", ""), new)
            except TrawlError as exc:
                error, status_code = exc.detail, exc.status
            else:
                session.login(g.user)  # this session goes on; every other one has ended
                flash("Password changed. Your other sessions and API tokens have ended.", "success")
                return redirect(url_for("ui.account"))
    return render_template("account.html", user=auth.user_json(g.user), error=error), status_code


@bp.route("/account/tokens", methods=["GET", "POST"])
def account_tokens():
    """Your API tokens: create one (its secret is shown once, on this page) or revoke one."""
    created, error, status_code = None, None, 200
    if request.method == "POST":
        days = (request.form.get("expires_in_days") or "").strip()
        try:
            created = tokens.create(
                g.user,
                request.form.get("name", ""),
                request.form.get("scope", "read"),
                int(days) if days.isdigit() else (days or None),
            )
        except TrawlError as exc:
            error, status_code = exc.detail, exc.status
    mine = [t for t in tokens.list_for(g.user) if t["user_id"] == g.user.id]
    return render_template(
        "tokens.html", tokens=mine, created=created, error=error, scopes=tokens.SCOPES
    ), status_code


@bp.post("/account/tokens/<int:token_id>/delete")
def account_token_delete(token_id: int):
    """Revoke one of your tokens at once."""
    tokens.delete(g.user, token_id)
    flash("Token revoked.", "success")
    return redirect(url_for("ui.account_tokens"))
