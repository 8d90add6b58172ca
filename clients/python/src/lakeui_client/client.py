"""`Client`: typed methods over LakeUI's HTTP API (httpx); job-returning calls take `wait=True`."""

import os
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx

from lakeui_client.errors import JobFailed, LakeUIError, from_response

API_VERSION = "1"  # the API path this client speaks: /api/v1/
FINISHED = {"succeeded", "failed", "cancelled", "conflict"}


def _q(part: str) -> str:
    return quote(part, safe="/")


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 60) -> None:
        url = url or os.environ.get("LAKEUI_URL")
        if not url:
            raise LakeUIError("no LakeUI URL: pass url=, set LAKEUI_URL or run `lakeui login URL`")
        token = token or os.environ.get("LAKEUI_TOKEN")
        headers = {"Authorization": f"Token {token}"} if token else {}
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=f"{self.url}/api/v{API_VERSION}/", headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path.lstrip("/"), **kwargs)
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = response.text
            raise from_response(response.status_code, body)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

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

    def columns(self, catalog: str, ref: str, table: str) -> list[dict]:
        return list(self.pages(f"{self._table(catalog, ref, table)}/columns"))

    def rows(self, catalog: str, ref: str, table: str, **params: Any) -> Any:
        return self.request("GET", f"{self._table(catalog, ref, table)}/rows", params=params)

    # data jobs
    def load(
        self,
        catalog: str,
        branch: str,
        table: str,
        *,
        wait: bool = True,
        file: str | None = None,
        progress: Callable[[dict], None] | None = None,
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
        wait: bool = True,
        progress: Callable[[dict], None] | None = None,
        **fields: Any,
    ) -> dict:
        body = {"source": source, "target": target, "dry_run": dry_run, **fields}
        return self._maybe_wait(self.request("POST", f"catalogs/{_q(catalog)}/merges", json=body), wait, progress)

    def sql(self, catalog: str, statement: str, branch: str | None = None, limit: int = 1000) -> dict:
        body = {"statement": statement, "limit": limit, **({"branch": branch} if branch else {})}
        return self.request("POST", f"catalogs/{_q(catalog)}/sql", json=body)

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
        progress: Callable[[dict], None] | None = None,
    ) -> dict:
        """Poll until the job is finished; a failed, cancelled or conflicting job raises `JobFailed`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if progress:
                progress(job)
            if job["status"] in FINISHED:
                if job["status"] != "succeeded":
                    raise JobFailed(job)
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise LakeUIError(f"job {job_id} still {job['status']} after {timeout}s")
            time.sleep(interval)

    def _maybe_wait(self, job: dict, wait: bool, progress: Callable[[dict], None] | None = None) -> dict:
        return self.wait(job["id"], progress=progress) if wait and isinstance(job, dict) and "id" in job else job

    # PySpark reader and writer (lakeui_client.spark)
    def table_scan(self, catalog: str, ref: str, table: str, at: str | None = None) -> dict:
        """The table's scan plan at a ref: schema with column ids, segments, their delete files, the warehouse."""
        return self.request("GET", f"{self._table(catalog, ref, table)}/scan", params={"at": at} if at else None)

    def table_staging(self, catalog: str, branch: str, table: str) -> dict:
        """A new staging location (`id`, `uri`) to write Parquet to, then load with `load(..., staged=id)`."""
        return self.request("POST", f"{self._table(catalog, branch, table)}/staging")


def _form(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [str(v) for v in value]  # repeated form fields: DRF's ListField reads them with getlist
    return str(value).lower() if isinstance(value, bool) else value
