"""`Client`: typed methods over LakeUI's HTTP API (httpx); job-returning calls take `wait=True`."""

import contextlib
import hashlib
import hmac
import json
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click
import httpx

from lakeui_client.errors import JobFailed, LakeUIError, VersionMismatch, VersionWarning, from_job, from_response

API_VERSION = "1.0"  # MAJOR.MINOR of the API this client speaks; MAJOR is the path, /api/v1/
VERSION_HEADER = "LakeUI-API-Version"
FINISHED = {"succeeded", "failed", "cancelled"}

Progress = Callable[[dict], None] | None


def _q(part: str) -> str:
    return quote(part, safe="/")


def _version(text: str) -> tuple[int, int]:
    major, _, minor = text.strip().partition(".")
    return int(major), int(minor or 0)


def version_problem(server: str | None, client: str = API_VERSION) -> tuple[bool, str] | None:
    """(fatal, what to say) when the server's API version is not the client's, else None. Another major version
    is fatal (the paths and answers differ); another minor one is a warning (calls added since may be missing,
    or the server offers more than this client knows)."""
    if not server:
        return False, f"the server sends no API version: it is older than API {client}, which this client speaks"
    try:
        theirs, ours = _version(server), _version(client)
    except ValueError:
        return False, f"the server's API version {server!r} cannot be read; this client speaks API {client}"
    if theirs == ours:
        return None
    side, advice = ("older", "upgrade the server") if theirs < ours else ("newer", "upgrade lakeui-client")
    message = f"the server speaks API {server}, {side} than API {client} which this client understands; {advice}"
    return theirs[0] != ours[0], message


def config_path() -> Path:
    """Where `lakeui login` saves the URL and token: `~/.config/lakeui/config.json` (under `XDG_CONFIG_HOME` when
    it is set)."""
    return Path(click.get_app_dir("lakeui")) / "config.json"


def saved_login() -> dict:
    """The URL and token `lakeui login` saved, or {} when there is no saved login."""
    path = config_path()
    if not path.exists():
        return {}
    try:
        saved = json.loads(path.read_text())
    except ValueError as error:
        raise LakeUIError(f"the saved login {path} is not JSON ({error}): run `lakeui login URL` again") from None
    return saved if isinstance(saved, dict) else {}


def connection(url: str | None = None, token: str | None = None) -> tuple[str | None, str | None]:
    """The URL and token to use: the arguments, else `LAKEUI_URL` and `LAKEUI_TOKEN`, else the saved login (its
    token only with its URL: a token saved for one server is never sent to another)."""
    url, token = url or os.environ.get("LAKEUI_URL"), token or os.environ.get("LAKEUI_TOKEN")
    if not url:
        saved = saved_login()
        url, token = saved.get("url"), token or saved.get("token")
    return url, token


class Client:
    api_version = API_VERSION

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 60) -> None:
        """`Client()` connects with `LAKEUI_URL` and `LAKEUI_TOKEN`, or else with the login `lakeui login` saved;
        `url=` and `token=` win over both."""
        url, token = connection(url, token)
        if not url:
            raise LakeUIError("no LakeUI URL: pass url=, set LAKEUI_URL or run `lakeui login URL`")
        headers = {"Authorization": f"Token {token}"} if token else {}
        self.url = url.rstrip("/")
        self.server_version: str | None = None  # the API version the server named, once it answered
        major = _version(self.api_version)[0]
        self.http = httpx.Client(base_url=f"{self.url}/api/v{major}/", headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path.lstrip("/"), **kwargs)
        self._checked(response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def _checked(self, response: httpx.Response) -> None:
        """The server's API version checked, and an error answer raised as the client's error (its JSON body, or
        its text)."""
        self._check_version(response)
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = response.text
            raise from_response(response.status_code, body)

    def _check_version(self, response: httpx.Response) -> None:
        """Checked on the first answer from LakeUI (a proxy's error page names no version and is not judged).
        Another major version raises on every call, before its answer is misread."""
        server = response.headers.get(VERSION_HEADER)
        if server is None and (response.status_code >= 500 or self.server_version is not None):
            return
        first = self.server_version is None
        self.server_version = server or ""
        problem = version_problem(server, self.api_version)
        if problem is None:
            return
        fatal, message = problem
        if fatal:
            raise VersionMismatch(f"{self.url}: {message}")
        if first:
            warnings.warn(f"{self.url}: {message}", VersionWarning, stacklevel=4)

    def pages(self, path: str, **params: Any) -> Iterator[dict]:
        page = 1
        while True:
            body = self.request("GET", path, params={**params, "page": page, "page_size": 500})
            if not isinstance(body, dict) or "results" not in body:
                yield from body or []
                return
            yield from body["results"]
            if not body.get("next"):
                return
            page += 1

    # catalogs
    def catalogs(self) -> list[dict]:
        return list(self.pages("catalogs"))

    def catalog_create(self, name: str, description: str = "") -> dict:
        return self.request("POST", "catalogs", json={"name": name, "description": description})

    def catalog(self, name: str) -> dict:
        return self.request("GET", f"catalogs/{_q(name)}")

    def catalog_delete(self, name: str) -> None:
        self.request("DELETE", f"catalogs/{_q(name)}")

    # branches and tags
    def branches(self, catalog: str) -> list[dict]:
        return list(self.pages(f"catalogs/{_q(catalog)}/branches"))

    def branch(self, catalog: str, name: str) -> dict:
        return self.request("GET", f"catalogs/{_q(catalog)}/branches/{_q(name)}")

    def branch_create(self, catalog: str, name: str, source: str | None = None, at: str | None = None) -> dict:
        body = {"name": name, **({"source": source} if source else {}), **({"at": at} if at else {})}
        return self.request("POST", f"catalogs/{_q(catalog)}/branches", json=body)

    def branch_delete(self, catalog: str, name: str) -> None:
        self.request("DELETE", f"catalogs/{_q(catalog)}/branches/{_q(name)}")

    def tags(self, catalog: str) -> list[dict]:
        return list(self.pages(f"catalogs/{_q(catalog)}/tags"))

    def tag_create(self, catalog: str, name: str, ref: str) -> dict:
        return self.request("POST", f"catalogs/{_q(catalog)}/tags", json={"name": name, "ref": ref})

    def tag_delete(self, catalog: str, name: str) -> None:
        self.request("DELETE", f"catalogs/{_q(catalog)}/tags/{_q(name)}")

    def commits(self, catalog: str, ref: str) -> list[dict]:
        return list(self.pages(f"catalogs/{_q(catalog)}/refs/{_q(ref)}/commits"))

    # databases, tables, columns
    def databases(self, catalog: str, ref: str) -> list[dict]:
        return list(self.pages(f"catalogs/{_q(catalog)}/refs/{_q(ref)}/databases"))

    def database_create(self, catalog: str, branch: str, name: str, comment: str = "") -> dict:
        return self.request(
            "POST", f"catalogs/{_q(catalog)}/refs/{_q(branch)}/databases", json={"name": name, "comment": comment}
        )

    def database_update(self, catalog: str, branch: str, name: str, **fields: Any) -> dict:
        """PATCH `name`, `set_properties`, `unset_properties`, `comment`."""
        return self.request("PATCH", f"catalogs/{_q(catalog)}/refs/{_q(branch)}/databases/{_q(name)}", json=fields)

    def database_delete(self, catalog: str, branch: str, name: str, *, cascade: bool = False) -> None:
        path = f"catalogs/{_q(catalog)}/refs/{_q(branch)}/databases/{_q(name)}"
        self.request("DELETE", path, params={"cascade": "true"} if cascade else {})

    def table_create(self, catalog: str, branch: str, table: str, columns: list[dict], **fields: Any) -> dict:
        database, _, name = table.partition(".")
        path = f"catalogs/{_q(catalog)}/refs/{_q(branch)}/databases/{_q(database)}/tables"
        return self.request("POST", path, json={"name": name, "columns": columns, **fields})

    def tables(self, catalog: str, ref: str, database: str) -> list[dict]:
        return list(self.pages(f"catalogs/{_q(catalog)}/refs/{_q(ref)}/databases/{_q(database)}/tables"))

    def _table(self, catalog: str, ref: str, table: str) -> str:
        database, _, name = table.partition(".")
        if not name:
            raise LakeUIError(f"table {table!r}: expected db.table")
        return f"catalogs/{_q(catalog)}/refs/{_q(ref)}/databases/{_q(database)}/tables/{_q(name)}"

    def table(self, catalog: str, ref: str, table: str) -> dict:
        return self.request("GET", self._table(catalog, ref, table))

    def table_update(self, catalog: str, branch: str, table: str, **fields: Any) -> dict:
        """PATCH `name`, `set_properties`, `unset_properties`, `partition_by`."""
        return self.request("PATCH", self._table(catalog, branch, table), json=fields)

    def table_delete(self, catalog: str, branch: str, table: str) -> None:
        self.request("DELETE", self._table(catalog, branch, table))

    def history(self, catalog: str, ref: str, table: str) -> dict:
        """`versions` of db.table, newest first, each with its commit and operations, and its `schema_versions`."""
        return self.request("GET", f"{self._table(catalog, ref, table)}/history")

    def column_add(self, catalog: str, branch: str, table: str, **column: Any) -> dict:
        return self.request("POST", f"{self._table(catalog, branch, table)}/columns", json=column)

    def column_update(self, catalog: str, branch: str, table: str, column: str, **fields: Any) -> dict:
        return self.request("PATCH", f"{self._table(catalog, branch, table)}/columns/{_q(column)}", json=fields)

    def column_delete(self, catalog: str, branch: str, table: str, column: str) -> None:
        self.request("DELETE", f"{self._table(catalog, branch, table)}/columns/{_q(column)}")

    def columns(self, catalog: str, ref: str, table: str) -> list[dict]:
        """The table's columns (the API lists them with the table; `.../columns` only takes writes)."""
        return self.table(catalog, ref, table)["columns"]

    def rows(self, catalog: str, ref: str, table: str, *, wait: bool = True, **params: Any) -> Any:
        """A page of db.table's rows at `ref` (`page`, `page_size`, `at`). A page the server has a worker read is
        answered at once with `{complete: false, job}`: with `wait`, read again until it is there."""
        path = f"{self._table(catalog, ref, table)}/rows"
        return self._complete(lambda: self.request("GET", path, params=params), wait=wait)

    # data jobs
    def load(
        self,
        catalog: str,
        branch: str,
        table: str,
        *,
        wait: bool = True,
        file: str | None = None,
        progress: Progress = None,
        **fields: Any,
    ) -> dict:
        path = f"{self._table(catalog, branch, table)}/load"
        if file:
            with open(file, "rb") as handle:
                job = self.request(
                    "POST",
                    path,
                    data={k: _form(v) for k, v in fields.items()},
                    files={"file": (os.path.basename(file), handle)},
                )
        else:
            job = self.request("POST", path, json=fields)
        return self._maybe_wait(job, wait, progress)

    def delete_rows(self, catalog: str, branch: str, table: str, *, wait: bool = True, **fields: Any) -> dict:
        return self._maybe_wait(
            self.request("POST", f"{self._table(catalog, branch, table)}/delete", json=fields), wait
        )

    def update_rows(self, catalog: str, branch: str, table: str, *, wait: bool = True, **fields: Any) -> dict:
        return self._maybe_wait(
            self.request("POST", f"{self._table(catalog, branch, table)}/update", json=fields), wait
        )

    def compact(self, catalog: str, branch: str, table: str, *, wait: bool = True, **fields: Any) -> dict:
        return self._maybe_wait(
            self.request("POST", f"{self._table(catalog, branch, table)}/compact", json=fields), wait
        )

    # merges and SQL
    def merge(
        self,
        catalog: str,
        source: str,
        target: str,
        *,
        dry_run: bool = False,
        override_checks: str | None = None,
        wait: bool = True,
        progress: Progress = None,
        **fields: Any,
    ) -> dict:
        """Merge `source` into `target`; with `wait`, the finished job. A merge its checks refuse raises
        `JobConflict` with code `checks_failed` (the runs in `details["checks"]`) and moves no branch. An admin
        merges through failed checks with `override_checks="why"` (the audit log keeps the reason)."""
        body = {"source": source, "target": target, "dry_run": dry_run, **fields}
        if override_checks is not None:
            body["override_checks"] = override_checks
        return self._maybe_wait(self.request("POST", f"catalogs/{_q(catalog)}/merges", json=body), wait, progress)

    def merges(self, catalog: str) -> list[dict]:
        """The catalog's merges and dry runs, newest first."""
        return list(self.pages(f"catalogs/{_q(catalog)}/merges"))

    def merge_log(self, catalog: str, merge_id: str) -> dict:
        """One merge's audit log: heads, ancestor, commit, the full diff report and what was done."""
        return self.request("GET", f"catalogs/{_q(catalog)}/merges/{merge_id}")

    def revert(
        self, catalog: str, branch: str, commit: str, *, wait: bool = True, progress: Progress = None, **fields: Any
    ) -> dict:
        """Undo one commit of `branch`'s history (a merge commit: what it brought): one new commit, or nothing."""
        body = {"branch": branch, "commit": commit, **fields}
        return self._maybe_wait(self.request("POST", f"catalogs/{_q(catalog)}/reverts", json=body), wait, progress)

    def cherry_pick(
        self,
        catalog: str,
        branch: str,
        commit: str | None = None,
        *,
        start: str | None = None,
        end: str | None = None,
        wait: bool = True,
        progress: Progress = None,
        **fields: Any,
    ) -> dict:
        """Apply one commit of any ref onto `branch`, or each commit of the range `start..end` (git's `rev-list
        start..end`), all or none."""
        if (commit is None) == (start is None or end is None):
            raise LakeUIError("cherry_pick: give commit=, or start= and end=")
        picked = {"commit": commit} if commit else {"from": start, "to": end}
        body = {"branch": branch, **picked, **fields}
        return self._maybe_wait(self.request("POST", f"catalogs/{_q(catalog)}/cherry-picks", json=body), wait, progress)

    def reverts(self, catalog: str) -> list[dict]:
        """The catalog's reverts (audit logs), newest first."""
        return list(self.pages(f"catalogs/{_q(catalog)}/reverts"))

    def cherry_picks(self, catalog: str) -> list[dict]:
        return list(self.pages(f"catalogs/{_q(catalog)}/cherry-picks"))

    # diffs
    def diff(self, catalog: str, source: str, target: str, *, wait: bool = True) -> dict:
        """The merge diff of `source` into `target`: every changed object, each side's operations and the verdict
        of each pair by the rule tables. The server answers at once; while primary-key tables are compared by key
        on a worker the report is not `complete` and names the `job`: with `wait`, read again until it is."""

        def read() -> dict:
            return self.request("GET", f"catalogs/{_q(catalog)}/diff", params={"from": source, "to": target})

        return self._complete(read, wait=wait)

    def _complete(self, read: Callable[[], dict], *, wait: bool = True, interval: float = 0.5) -> dict:
        """`read()` again until its answer is `complete` (a diff whose key comparison `job` has finished, a page a
        worker reads); the job's failure raises as a failed job's would. A read again starts no second job."""
        if not wait:
            return read()
        finished = 0
        while True:
            body = read()
            job = body.get("job") if isinstance(body, dict) else None
            if not job or body.get("complete", True):
                return body
            if job["status"] in FINISHED - {"succeeded"}:
                raise from_job(job)
            finished += job["status"] == "succeeded"
            if finished > 1:  # finished, yet the diff is still incomplete: show what is known
                return body
            time.sleep(interval)

    def data_diff(
        self, catalog: str, source: str, target: str, table: str, *, page: int = 1, page_size: int = 50,
        wait: bool = True,
    ) -> dict:  # fmt: skip
        """A page of the rows of db.table added, deleted and changed from `source` to `target` (any refs: branches,
        tags, commit ids), with the counts: by key with the changed cells for a primary-key table. A page a worker
        reads is answered at once with `{complete: false, job}`: with `wait`, read again until it is there."""
        params = {"from": source, "to": target, "table": table, "page": page, "page_size": page_size}
        path = f"catalogs/{_q(catalog)}/diff/rows"
        return self._complete(lambda: self.request("GET", path, params=params), wait=wait)

    def diff_tables(self, catalog: str, source: str, target: str) -> dict:
        """The tables whose rows or definition differ between two refs (any direction), each with the URL of its
        changed rows; `from` and `to` are the commits compared."""
        return self.request("GET", f"catalogs/{_q(catalog)}/diff/rows", params={"from": source, "to": target})

    def diff_rows(self, catalog: str, source: str, target: str, *, page_size: int = 50) -> list[dict]:
        """Every changed table between two refs with the first page of its changed rows (`lakeui diff --rows`)."""
        listed = self.diff_tables(catalog, source, target)
        return [
            {**table, **self.data_diff(catalog, listed["from"], listed["to"], table["table"], page_size=page_size)}
            if table["change"] != "dropped" else table
            for table in listed["tables"]
        ]  # fmt: skip

    def changes_page(
        self, catalog: str, source: str, target: str, *, table: str | None = None, page: int = 1, page_size: int = 500
    ) -> dict:
        """One page of the row changes of `target`'s state against `source`'s (docs/changes.md): `count`, `next`,
        `source` and `target` (the two commits compared), `tables` (each changed table with its counts) and
        `results` (the records)."""
        params = {"from": source, "to": target, "page": page, "page_size": page_size}
        if table:
            params["table"] = table
        return self.request("GET", f"catalogs/{_q(catalog)}/changes", params=params)

    def changes(
        self, catalog: str, source: str, target: str, *, table: str | None = None, page_size: int = 500
    ) -> Iterator[dict]:
        """Every row change of `target`'s state against `source`'s (any two refs: branches, tags, commit ids), of
        every changed table or of `table` ("db.table"), page after page: each record a dict with `table`, `change`
        (insert, update, delete), `key`, `before`, `after`, `changed`, `commit`, `merge` and `merge_request`. The
        first page pins both refs to the commits they named then, so a branch that moves meanwhile does not mix two
        states into one read."""
        page = 1
        while True:
            body = self.changes_page(catalog, source, target, table=table, page=page, page_size=page_size)
            source, target = body["source"], body["target"]
            yield from body["results"]
            if not body.get("next"):
                return
            page += 1

    def changes_arrow(self, catalog: str, source: str, target: str, table: str):
        """One table's row changes as a `pyarrow.Table` (the API's Arrow IPC stream): `_change`, each column before
        (`b:<name>`) and after (`a:<name>`), `_changed`, `_commit`, `_merge`, `_merge_request`. Needs pyarrow."""
        import pyarrow as pa

        params = {"from": source, "to": target, "table": table}
        accept = {"Accept": "application/vnd.apache.arrow.stream"}
        with self.http.stream("GET", f"catalogs/{_q(catalog)}/changes", params=params, headers=accept) as response:
            body = response.read()
        self._checked(response)
        return pa.ipc.open_stream(body).read_all()

    # subscriptions to a branch's changes (docs/changes.md#subscriptions)
    def subscription_create(self, catalog: str, name: str, branch: str, *, tables: Iterable[str] = ()) -> dict:
        """A named cursor on `branch` (of `tables`, "db.table", or every table), at the branch's head now."""
        body = {"name": name, "branch": branch, "tables": list(tables)}
        return self.request("POST", f"catalogs/{_q(catalog)}/subscriptions", json=body)

    def subscriptions(self, catalog: str) -> list[dict]:
        """The catalog's subscriptions, each with its cursor and lag (`lag_commits`)."""
        return self.request("GET", f"catalogs/{_q(catalog)}/subscriptions")["results"]

    def subscription_delete(self, catalog: str, name: str) -> None:
        self.request("DELETE", f"catalogs/{_q(catalog)}/subscriptions/{_q(name)}")

    def subscription_batch(self, catalog: str, name: str, *, page_size: int = 500) -> dict:
        """The batch of changes since the subscription's cursor, every page read: `ack` (the token that acknowledges
        it), `source` and `target` (the commits it goes from and to) and `records`. Until acknowledged, the same
        batch comes back: apply it, then `subscription_ack(catalog, name, batch["ack"])`."""
        path = f"catalogs/{_q(catalog)}/subscriptions/{_q(name)}/changes"
        records, page = [], 1
        while True:
            body = self.request("GET", path, params={"page": page, "page_size": page_size})
            records += body["results"]
            if not body.get("next"):
                return {"ack": body["ack"], "source": body["source"], "target": body["target"], "records": records}
            page += 1

    def subscription_ack(self, catalog: str, name: str, token: str) -> dict:
        """Acknowledge the batch `token` names: the cursor moves to its end. A second acknowledgement is an
        `ApiError` 409 `stale_ack`."""
        path = f"catalogs/{_q(catalog)}/subscriptions/{_q(name)}/changes"
        return self.request("POST", path, json={"ack": token})

    def blame(self, catalog: str, ref: str, table: str, *, key: Any = None, page: int = 1, page_size: int = 50) -> dict:
        """Who wrote the values db.table holds at `ref` (docs/provenance.md): a page of its rows (a keyed table's by
        key), each with, per cell (keyed) or for the row (keyless), the `commit` that wrote it and the `chain` of
        merges and picks that brought it to the ref; `commits` describes every commit named (author, time, branch;
        a merge's request, approvers and checks; a pick's original). `key`: one key only (its values as a list, or
        the value of a one-column key)."""
        params: dict[str, Any] = {"page": page, "page_size": page_size}
        if key is not None:
            params["key"] = json.dumps(key if isinstance(key, list | tuple) else [key], default=str)
        return self.request("GET", f"{self._table(catalog, ref, table)}/blame", params=params)

    def key_history(self, catalog: str, ref: str, table: str, key: Any) -> dict:
        """Every version of one key of db.table reachable at `ref`, newest first (`versions`: change, row, changed
        columns, the commit that made it and the chain of merges and picks that brought it), and `commits`."""
        params = {"key": json.dumps(key if isinstance(key, list | tuple) else [key], default=str)}
        return self.request("GET", f"{self._table(catalog, ref, table)}/history", params=params)

    def commit(self, catalog: str, commit_id: str) -> dict:
        """One commit: parents, author, message, operations with their tables and row counts, the URL of each
        table's changed rows, and for a merge commit its audit log."""
        return self.request("GET", f"catalogs/{_q(catalog)}/commits/{_q(commit_id)}")

    def diff_keys(self, catalog: str, source: str, target: str, table: str) -> list[dict]:
        """A primary-key table's conflicting keys, each with the ancestor's, the source's and the target's row."""
        params = {"from": source, "to": target, "table": table}
        path = f"catalogs/{_q(catalog)}/diff/keys"
        self._complete(lambda: self.request("GET", path, params={**params, "page_size": 1}))  # compared first
        return list(self.pages(path, **params))

    # restores
    def restore(
        self,
        catalog: str,
        branch: str,
        *,
        table: str | None = None,
        commit: str | None = None,
        at: str | None = None,
        wait: bool = True,
        progress: Progress = None,
    ) -> dict:
        """Restore the branch, or only db.`table` on it, to a commit or to the branch as it was at a time (ISO
        8601): one new commit. Give exactly one of `commit` and `at`."""
        if (commit is None) == (at is None):
            raise LakeUIError("restore: give exactly one of commit= and at=")
        body: dict[str, Any] = {"branch": branch, **({"commit": commit} if commit else {"timestamp": at})}
        if table:
            database, _, name = table.partition(".")
            if not name:
                raise LakeUIError(f"table {table!r}: expected db.table")
            body |= {"database": database, "table": name}
        return self._maybe_wait(self.request("POST", f"catalogs/{_q(catalog)}/restores", json=body), wait, progress)

    def restores(self, catalog: str) -> list[dict]:
        return list(self.pages(f"catalogs/{_q(catalog)}/restores"))

    def restore_log(self, catalog: str, restore_id: str) -> dict:
        return self.request("GET", f"catalogs/{_q(catalog)}/restores/{restore_id}")

    # merge requests and reviews
    def merge_requests(self, catalog: str, state: str | None = None) -> list[dict]:
        params = {"state": state} if state else {}
        return list(self.pages(f"catalogs/{_q(catalog)}/merge-requests", **params))

    def merge_request(self, catalog: str, number: int) -> dict:
        """The request with its plan, status (blockers), reviews and timeline. Reading it changes nothing: a plan of
        older heads says so (`status.moved`) while the server's workers plan it again."""
        return self.request("GET", f"catalogs/{_q(catalog)}/merge-requests/{int(number)}")

    def merge_request_open(
        self,
        catalog: str,
        source: str,
        target: str,
        title: str,
        description: str = "",
        *,
        wait: bool = True,
        progress: Progress = None,
    ) -> dict:
        """Open a request; with `wait`, return it once its plan job has finished. A plan that failed is not
        raised: the request is open all the same, and its `status.blockers` say `plan_failed`."""
        body = {"source": source, "target": target, "title": title, "description": description}
        opened = self.request("POST", f"catalogs/{_q(catalog)}/merge-requests", json=body)
        plan_job = opened.get("plan_job")
        if not wait or not plan_job:
            return opened
        with contextlib.suppress(JobFailed):
            self.wait(plan_job["id"], progress=progress)
        return self.merge_request(catalog, opened["number"])

    def merge_request_update(self, catalog: str, number: int, **fields: Any) -> dict:
        """Change `title`, `description`, `state` ("open" | "closed") or `resolutions`."""
        return self.request("PATCH", f"catalogs/{_q(catalog)}/merge-requests/{int(number)}", json=fields)

    def merge_request_close(self, catalog: str, number: int) -> dict:
        return self.merge_request_update(catalog, number, state="closed")

    def merge_request_resolve(self, catalog: str, number: int, resolutions: dict) -> dict:
        """Choose how conflicts merge: {"default": choice, "tables": {"db.t": choice | {"choice": choice, "columns":
        {column: rule}}}, "keys": {...}}; a column rule settles a primary-key table's conflicting cells of that column
        (source_wins, target_wins, base, greatest, least, sum_of_changes, concat, {"concat": {"separator": s}} or
        {"expression": "CASE WHEN source.status = 'closed' THEN source.amount ELSE target.amount END"}; null takes
        it back). `merge(..., resolution=...)` takes the same JSON. A reviewer's value for one conflicting cell:
        {"cells": {"db.t": {"[9]": {"amount": {"value": 12}, "status": {"pick": "source"}}}}} (a key by its values
        as a JSON list; a pick of "base", "source" or "target", or a typed value; null takes a pick back)."""
        return self.merge_request_update(catalog, number, resolutions=resolutions)

    def merge_request_resolution(
        self, catalog: str, number: int, *, table: str | None = None, offset: int = 0, limit: int = 50
    ) -> dict:
        """The request's resolution and the preview of the merged cells its plan computed: per conflicting key of
        `table` (by default the first in conflict) base, source, target, result and the rule that made it
        (`current` false while a plan for the heads and the resolution is being made)."""
        params = {"offset": offset, "limit": limit, **({"table": table} if table else {})}
        return self.request("GET", f"catalogs/{_q(catalog)}/merge-requests/{int(number)}/resolution", params=params)

    def merge_request_reviews(self, catalog: str, number: int) -> list[dict]:
        return self.merge_request(catalog, number)["reviews"]

    def merge_request_review(self, catalog: str, number: int, decision: str, comment: str = "") -> dict:
        """Review as an approver: `decision` "approve" or "request_changes"."""
        path = f"catalogs/{_q(catalog)}/merge-requests/{int(number)}/reviews"
        return self.request("POST", path, json={"decision": decision, "comment": comment})

    def merge_request_approve(self, catalog: str, number: int, comment: str = "") -> dict:
        return self.merge_request_review(catalog, number, "approve", comment)

    def merge_request_request_changes(self, catalog: str, number: int, comment: str = "") -> dict:
        return self.merge_request_review(catalog, number, "request_changes", comment)

    def merge_request_merge(
        self,
        catalog: str,
        number: int,
        *,
        override_checks: str | None = None,
        wait: bool = True,
        progress: Progress = None,
    ) -> dict:
        """Merge the request (refused with the first blocker's code while one stands: `checks_failed`,
        `checks_pending`, ...); the merge job. An admin merges through failed checks (not pending ones) with
        `override_checks="why"`."""
        body = {"override_checks": override_checks} if override_checks is not None else {}
        job = self.request("POST", f"catalogs/{_q(catalog)}/merge-requests/{int(number)}/merge", json=body)
        return self._maybe_wait(job, wait, progress)

    def merge_request_checks(self, catalog: str, number: int) -> list[dict]:
        """The request's checks on its current heads: each SQL check's newest run (`kind` "sql") and each external
        status of its source head (`kind` "external")."""
        return self.request("GET", f"catalogs/{_q(catalog)}/merge-requests/{int(number)}/checks")

    def merge_request_check_post(
        self,
        catalog: str,
        number: int,
        name: str,
        state: str,
        url: str = "",
        description: str = "",
        *,
        head: str,
    ) -> dict:
        """Post an external check's status (`state`: pending, success, failure or error) for the source head it
        tested (`head`: refused, 409 `branch_moved`, if the request's source head is another), as a CI system does.
        Needs the approver role, and the request's author may not."""
        body = {"name": name, "state": state, "url": url, "description": description, "head": head}
        return self.request("POST", f"catalogs/{_q(catalog)}/merge-requests/{int(number)}/checks", json=body)

    def merge_request_queue(self, catalog: str, number: int) -> dict:
        """ "Merge when ready": put an approved request in its target's merge queue; the entry (`position`,
        `state`). It merges once it is first in line and its result passed the target's checks."""
        return self.request("POST", f"catalogs/{_q(catalog)}/merge-requests/{int(number)}/queue")

    def merge_request_dequeue(self, catalog: str, number: int) -> dict:
        """Take a request out of the merge queue (its author or an admin); the entry, `reason` "dequeued"."""
        return self.request("DELETE", f"catalogs/{_q(catalog)}/merge-requests/{int(number)}/queue")

    def merge_request_queue_entry(self, catalog: str, number: int) -> dict:
        """The request's newest queue entry: its position (None once it left), state, and reason if it left."""
        return self.request("GET", f"catalogs/{_q(catalog)}/merge-requests/{int(number)}/queue")

    def branch_queue(self, catalog: str, branch: str) -> dict:
        """A branch's merge queue: `entries` in line (position, state, checked_with) and `recent` ones that
        left it (merged, or taken out with a `reason`)."""
        return self.request("GET", f"catalogs/{_q(catalog)}/branches/{_q(branch)}/queue")

    # access and maintenance
    def roles(self, catalog: str) -> list[dict]:
        return list(self.pages(f"catalogs/{_q(catalog)}/roles"))

    def role_grant(self, catalog: str, user: str, role: str) -> dict:
        """Give `user` a role: viewer, editor, approver or admin."""
        return self.request("POST", f"catalogs/{_q(catalog)}/roles", json={"user": user, "role": role})

    def role_revoke(self, catalog: str, user: str) -> None:
        self.request("DELETE", f"catalogs/{_q(catalog)}/roles/{_q(user)}")

    def protected_branches(self, catalog: str) -> list[dict]:
        return list(self.pages(f"catalogs/{_q(catalog)}/protected-branches"))

    def branch_protect(
        self,
        catalog: str,
        pattern: str,
        required_approvals: int = 1,
        required_checks: list[str] | None = None,
        *,
        require_queue: bool = False,
    ) -> dict:
        """Protect the branches matching `pattern`: written only by approved merge requests, which also need each
        external check named in `required_checks` to succeed on their source head; with `require_queue`, they merge
        only through the branch's merge queue."""
        body = {
            "pattern": pattern,
            "required_approvals": required_approvals,
            "required_checks": list(required_checks or []),
            "require_queue": require_queue,
        }
        return self.request("POST", f"catalogs/{_q(catalog)}/protected-branches", json=body)

    def branch_unprotect(self, catalog: str, rule_id: int) -> None:
        self.request("DELETE", f"catalogs/{_q(catalog)}/protected-branches/{int(rule_id)}")

    # webhooks (admins only)
    def webhooks(self, catalog: str) -> list[dict]:
        return list(self.pages(f"catalogs/{_q(catalog)}/webhooks"))

    def webhook(self, catalog: str, webhook_id: int) -> dict:
        return self.request("GET", f"catalogs/{_q(catalog)}/webhooks/{int(webhook_id)}")

    def webhook_create(
        self, catalog: str, url: str, events: list[str], secret: str | None = None, *, active: bool = True
    ) -> dict:
        """Add a webhook for `events` (kinds, or ["*"]). Without a secret the server makes one and returns it in
        `secret`, this once."""
        body = {"url": url, "events": list(events), "active": active}
        if secret is not None:
            body["secret"] = secret
        return self.request("POST", f"catalogs/{_q(catalog)}/webhooks", json=body)

    def webhook_update(self, catalog: str, webhook_id: int, **fields: Any) -> dict:
        """Change `url`, `events`, `secret` or `active`."""
        return self.request("PATCH", f"catalogs/{_q(catalog)}/webhooks/{int(webhook_id)}", json=fields)

    def webhook_delete(self, catalog: str, webhook_id: int) -> None:
        self.request("DELETE", f"catalogs/{_q(catalog)}/webhooks/{int(webhook_id)}")

    def webhook_deliveries(self, catalog: str, webhook_id: int) -> list[dict]:
        """Newest first."""
        return list(self.pages(f"catalogs/{_q(catalog)}/webhooks/{int(webhook_id)}/deliveries"))

    def webhook_delivery(self, catalog: str, webhook_id: int, delivery_id: str) -> dict:
        """One delivery with its body (`payload`) and every attempt (`attempts_log`)."""
        path = f"catalogs/{_q(catalog)}/webhooks/{int(webhook_id)}/deliveries/{_q(delivery_id)}"
        return self.request("GET", path)

    def webhook_redeliver(self, catalog: str, webhook_id: int, delivery_id: str) -> dict:
        """Send a delivery's event again: the new delivery (queued)."""
        path = f"catalogs/{_q(catalog)}/webhooks/{int(webhook_id)}/deliveries/{_q(delivery_id)}/redeliver"
        return self.request("POST", path)

    # SQL checks: everyone who sees the catalog reads them, admins change and run them
    def checks(self, catalog: str) -> list[dict]:
        return list(self.pages(f"catalogs/{_q(catalog)}/checks"))

    def check(self, catalog: str, check_id: int) -> dict:
        return self.request("GET", f"catalogs/{_q(catalog)}/checks/{int(check_id)}")

    def check_create(
        self, catalog: str, name: str, branches: str, sql: str, max_rows: int = 0, advisory: bool = False, *,
        wait: bool = True,
    ) -> dict:  # fmt: skip
        """Guard the target branches matching `branches` (main, release/*) with one SELECT that must return at most
        `max_rows` rows. A statement the SQL console would not run is refused (400 `invalid_query`, or
        `table_not_found`). A statement only Spark can parse is parsed by a job the server answers with at once
        (202), which saves the check: with `wait` (the default) the saved check once it has finished (its refusal
        raises as `JobFailed`), else that job."""
        body = {"name": name, "branches": branches, "sql": sql, "max_rows": max_rows, "advisory": advisory}
        return self._check_saved(catalog, self.request("POST", f"catalogs/{_q(catalog)}/checks", json=body), wait)

    def check_update(self, catalog: str, check_id: int, *, wait: bool = True, **changes: Any) -> dict:
        """Change `name`, `branches`, `sql`, `max_rows` or `advisory`; a new statement or bound is a new version.
        A new statement only Spark can parse is a job, followed as `check_create` follows it."""
        answer = self.request("PATCH", f"catalogs/{_q(catalog)}/checks/{int(check_id)}", json=changes)
        return self._check_saved(catalog, answer, wait)

    def _check_saved(self, catalog: str, answer: dict, wait: bool) -> dict:
        """The check a create or update answered with, or, for the statement job that saves it (`check_statement`),
        with `wait` the check once the job has saved it."""
        if not wait or answer.get("kind") != "check_statement" or "status" not in answer:
            return answer
        job = self.wait(answer["id"])
        return self.check(catalog, job["result"]["check"])

    def check_delete(self, catalog: str, check_id: int) -> None:
        self.request("DELETE", f"catalogs/{_q(catalog)}/checks/{int(check_id)}")

    def check_run(self, catalog: str, check_id: int, ref: str, *, wait: bool = True, progress: Progress = None) -> dict:
        """Run a check on a ref now. With `wait`, the finished run with its first failing rows (`columns`,
        `failing_rows`); a check that fails is a run whose `state` is "failure", not an error. Else the job."""
        path = f"catalogs/{_q(catalog)}/checks/{int(check_id)}/runs"
        job = self._maybe_wait(self.request("POST", path, json={"ref": ref}), wait, progress)
        return self.check_run_get(catalog, job["result"]["id"]) if wait else job

    def check_runs(self, catalog: str, check_id: int) -> list[dict]:
        """The check's runs, newest first."""
        return list(self.pages(f"catalogs/{_q(catalog)}/checks/{int(check_id)}/runs"))

    def check_run_get(self, catalog: str, run_id: str) -> dict:
        """One run with its first 100 failing rows (`columns`, `failing_rows`)."""
        return self.request("GET", f"catalogs/{_q(catalog)}/check-runs/{_q(run_id)}")

    # retention: admins (docs/retention.md)
    def retention(self, catalog: str) -> list[dict]:
        """The catalog's retention rules, `[{pattern, keep_days, keep_commits}]` (empty: keep everything)."""
        return self.request("GET", f"catalogs/{_q(catalog)}/retention")["rules"]

    def retention_set(self, catalog: str, rules: list[dict]) -> list[dict]:
        """Replace the rules. Nothing expires until `retention_expire` (or the scheduled run)."""
        return self.request("PUT", f"catalogs/{_q(catalog)}/retention", json={"rules": rules})["rules"]

    def retention_preview(self, catalog: str, rules: list[dict] | None = None) -> dict:
        """What an expiry by `rules` (default: the saved ones) would remove now, per ref; changes nothing."""
        body = {"rules": rules} if rules is not None else {}
        return self.request("POST", f"catalogs/{_q(catalog)}/retention/preview", json=body)

    def retention_expire(self, catalog: str, *, wait: bool = True, progress: Progress = None) -> dict:
        """Expire by the saved rules (a job): with `wait`, the finished job, whose result is the plan carried out."""
        return self._maybe_wait(self.request("POST", f"catalogs/{_q(catalog)}/retention/expire"), wait, progress)

    def gc(self, catalog: str, grace_hours: float = 24, *, wait: bool = True) -> dict:
        """Remove the warehouse files no commit references and older than `grace_hours`."""
        job = self.request("POST", f"catalogs/{_q(catalog)}/gc", json={"grace_hours": grace_hours})
        return self._maybe_wait(job, wait)

    def sql(
        self, catalog: str, statement: str, branch: str | None = None, limit: int = 1000, *, wait: bool = True,
        progress: Progress = None,
    ) -> dict:  # fmt: skip
        """Run a statement. A SELECT that Spark answers (not a small table's, which is answered at once), MERGE
        BRANCH, RESTORE, REVERT COMMIT and CHERRY-PICK COMMIT run as jobs, which the server answers with at once
        (202: the job, and `sql`, what the statement asked for): with `wait`, the statement's result once the job
        has finished (`sql` with the job's result), as the other statements answer; a refused job raises as a
        refused request would (`JobConflict` for a merge conflict, `LakeUIError` 400 for a query that fails)."""
        body = {"statement": statement, "limit": limit, **({"branch": branch} if branch else {})}
        answer = self.request("POST", f"catalogs/{_q(catalog)}/sql", json=body)
        if not wait or not isinstance(answer, dict) or "sql" not in answer or "id" not in answer:
            return answer
        job = self.wait(answer["id"], progress=progress)
        return {**answer["sql"], **(job.get("result") or {})}

    # jobs
    def job(self, job_id: str) -> dict:
        return self.request("GET", f"jobs/{job_id}")

    def jobs(self, **params: Any) -> list[dict]:
        return list(self.pages("jobs", **params))

    def job_cancel(self, job_id: str) -> dict:
        return self.request("POST", f"jobs/{job_id}/cancel")

    def wait(
        self,
        job_id: str,
        *,
        timeout: float | None = None,
        interval: float = 0.5,
        progress: Progress = None,
    ) -> dict:
        """Poll until the job is finished; a failed, cancelled or conflicting job raises `JobFailed`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if progress:
                progress(job)
            if job["status"] in FINISHED:
                if job["status"] != "succeeded":
                    raise from_job(job)
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise LakeUIError(f"job {job_id} still {job['status']} after {timeout}s")
            time.sleep(interval)

    def _maybe_wait(self, job: dict, wait: bool, progress: Progress = None) -> dict:
        return self.wait(job["id"], progress=progress) if wait and isinstance(job, dict) and "id" in job else job

    # PySpark reader and writer (lakeui_client.spark)
    def table_scan(
        self, catalog: str, ref: str, table: str, at: str | None = None, where: str | None = None,
        time_zone: str | None = None,
    ) -> dict:  # fmt: skip
        """The table's scan plan at a ref: schema with column ids, segments, their delete files, the warehouse.
        With `where`, only the segments that may hold matching rows (partition values and statistics)."""
        params = {name: value for name, value in (("at", at), ("where", where), ("time_zone", time_zone)) if value}
        return self.request("GET", f"{self._table(catalog, ref, table)}/scan", params=params or None)

    def table_staging(self, catalog: str, branch: str, table: str) -> dict:
        """A new staging location (`id`, `uri`) to write Parquet to, then load with `load(..., staged=id)`."""
        return self.request("POST", f"{self._table(catalog, branch, table)}/staging")

    # Arrow reads straight from the warehouse (lakeui_client.arrow; needs pyarrow)
    def read_arrow(self, catalog: str, ref: str, table: str, at: str | None = None, columns=None, filter=None):
        """The table at a ref as an Arrow table read from the warehouse (see `lakeui_client.arrow.read_arrow`)."""
        from lakeui_client.arrow import read_arrow

        return read_arrow(self, catalog, ref, table, at=at, columns=columns, filter=filter)

    def to_pandas(self, catalog: str, ref: str, table: str, at: str | None = None, columns=None, filter=None):
        from lakeui_client.arrow import to_pandas

        return to_pandas(self, catalog, ref, table, at=at, columns=columns, filter=filter)


def _form(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [str(v) for v in value]  # repeated form fields: DRF's ListField reads them with getlist
    return str(value).lower() if isinstance(value, bool) else value


def webhook_signature_valid(secret: str, body: bytes, signature: str | None) -> bool:
    """For a webhook's receiver: whether `signature` (the X-LakeUI-Signature header) is the HMAC-SHA256 of the raw
    request `body` with the webhook's secret. Compared in constant time."""
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return signature is not None and hmac.compare_digest(expected, signature)
