"""The SQL endpoint as a client that follows a statement's job sees it: MERGE BRANCH, RESTORE, REVERT COMMIT and
CHERRY-PICK COMMIT answer 202 with their job at once; their result is the statement (`sql`) with the job's result
once it has finished, or the job's refusal."""

import json

from tests.conftest import wait_for_job


def sql_followed(client, catalog, statement: str, timeout: float = 240, **fields) -> tuple[int, dict]:
    """(status, body) of a statement as if answered once its job had finished: 200 and the result, or the job's
    refusal with its HTTP status ({code, message, details}); other statements as the endpoint answers them."""
    response = client.post(f"/api/v1/catalogs/{catalog.name}/sql", {"statement": statement, **fields}, format="json")
    body = response.json()
    if response.status_code != 202:
        return response.status_code, body
    job = wait_for_job(body["id"], timeout=timeout)
    if job.status == "succeeded":
        return 200, {**body["sql"], **job.result}
    return job.error_status or 500, {"code": job.error_code, "message": job.error_message, "details": job.result}


class Answer:
    """A statement's answer once followed (`sql_followed`), read as a test client's response is."""

    def __init__(self, status_code: int, body: dict) -> None:
        self.status_code, self.body = status_code, body

    def json(self) -> dict:
        return self.body

    @property
    def content(self) -> bytes:
        return json.dumps(self.body).encode()


def sql_answer(client, catalog, statement: str, timeout: float = 240, **fields) -> Answer:
    """`sql_followed` as a response: a SELECT Spark answers is a 202 with its job, followed to its rows."""
    return Answer(*sql_followed(client, catalog, statement, timeout=timeout, **fields))
