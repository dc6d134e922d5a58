"""The Users page (admins): accounts, their role, state and granted sources; create, edit,
disable and delete through the same service as the API."""

from __future__ import annotations

from flask import flash, g, redirect, render_template, request, url_for
from flask_babel import gettext as _

from webapp.exceptions import TrawlError
from webapp.services import auth, ui_support, users
from webapp.ui.blueprint import bp
from webapp.ui.session import admin_required


def form_to_data(form, creating: bool) -> dict:
    """The form's fields as the API's user body (an empty password field changes nothing)."""
    data = {
        "username": form.get("username", "").strip(),
        "role": form.get("role", "user"),
        "active": form.get("active") == "1",
        "source_ids": form.getlist("source_ids"),
    }
    if creating or form.get("password"):
        data["password"] = form.get("password", "")
    return data


def _page(error: str | None = None, form: dict | None = None, status_code: int = 200):
    return render_template(
        "users.html",
        users=users.list_json(),
        error=error,
        form=form or {"role": "user", "active": True, "source_ids": []},
        sources=ui_support.source_choices(g.user),
    ), status_code


@bp.route("/users", methods=["GET", "POST"])
@admin_required
def users_page():
    """Every account, and the form that creates one."""
    if request.method == "GET":
        return _page()
    data = form_to_data(request.form, creating=True)
    try:
        user = users.create(data)
    except TrawlError as exc:
        return _page(exc.detail, data, exc.status)
    flash(_("User “%(name)s” created.", name=user.username), "success")
    return redirect(url_for("ui.users_page"))


@bp.route("/users/<int:user_id>", methods=["GET", "POST"])
@admin_required
def user_edit(user_id: int):
    """Edit an account: name, role, active, sources, a new password."""
    user = users.get(user_id)
    shown = auth.user_json(user)
    error, status_code = None, 200
    if request.method == "POST":
        data = form_to_data(request.form, creating=False)
        try:
            users.update(user_id, data)
        except TrawlError as exc:
            error, status_code, shown = exc.detail, exc.status, {**shown, **data}
        else:
            flash(_("User “%(name)s” saved.", name=user.username), "success")
            return redirect(url_for("ui.users_page"))
    return render_template(
        "user_edit.html", user=shown, error=error, sources=ui_support.source_choices(g.user)
    ), status_code


@bp.post("/users/<int:user_id>/delete")
@admin_required
def user_delete(user_id: int):
    """Delete an account (its sessions and tokens end)."""
    user = users.get(user_id)
    name = user.username
    try:
        users.delete(user_id)
    except TrawlError as exc:
        flash(exc.detail, "error")
    else:
        flash(_("User “%(name)s” deleted.", name=name), "success")
    return redirect(url_for("ui.users_page"))
