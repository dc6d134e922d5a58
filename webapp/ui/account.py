"""First-run setup, login and logout pages (session cookie; the API keeps bearer tokens), and
your account: password and API tokens."""

from __future__ import annotations

from flask import flash, g, make_response, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import refresh

from webapp import ratelimits
from webapp.exceptions import TrawlError
from webapp.services import auth, tokens
from webapp.ui import i18n, session
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
        error = _("Password: the two passwords do not match")
    else:
        try:
            user = auth.setup(form["username"], password)
        except TrawlError as exc:
            error = exc.detail
    if error:
        return render_template("setup.html", form=form, error=error), 400
    session.login(user)
    flash(_("Welcome, %(name)s. Add a folder to index to get started.", name=user.username), "success")
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
    flash(_("You have been logged out."), "info")
    return redirect(url_for("ui.login"))


@bp.route("/account", methods=["GET", "POST"])
def account():
    """Your account: change the password (every other session and token of it ends)."""
    error, status_code = None, 200
    if request.method == "POST":
        new = request.form.get("new_password", "")
        if new != request.form.get("new_password_confirm", ""):
            error, status_code = _("New password: the two passwords do not match"), 400
        else:
            try:
                auth.change_own_password(g.user, request.form.get("current_password", ""), new)
            except TrawlError as exc:
                error, status_code = exc.detail, exc.status
            else:
                session.login(g.user)  # this session goes on; every other one has ended
                flash(_("Password changed. Your other sessions and API tokens have ended."), "success")
                return redirect(url_for("ui.account"))
    return render_template(
        "account.html", user=auth.user_json(g.user), error=error, language=g.user.locale or ""
    ), status_code


@bp.post("/account/language")
def account_language():
    """Save the UI's language on the account ('' for the browser's choice) and in a cookie, so
    the login page keeps it after a logout."""
    choice = request.form.get("language", "")
    if choice and choice not in i18n.LANGUAGES:
        flash(_("Unknown language: %(code)s", code=choice), "error")
        return redirect(url_for("ui.account"))
    auth.set_locale(g.user, choice or None)
    refresh()  # the message below is in the language just chosen
    flash(_("Language saved."), "success")
    resp = make_response(redirect(url_for("ui.account")))
    if choice:
        resp.set_cookie(i18n.COOKIE, choice, max_age=i18n.COOKIE_DAYS * 86400, httponly=True, samesite="Lax")
    else:
        resp.delete_cookie(i18n.COOKIE)
    return resp


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
    flash(_("Token revoked."), "success")
    return redirect(url_for("ui.account_tokens"))
