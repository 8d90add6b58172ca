"""A read a worker answers (a table's rows, a table's changed rows) as its API's client sees it: 202 with
`{complete: false, job}` at once, then the read again once the job has finished (the same read follows the same job)."""

import time

POLL_INTERVAL = 0.2


def read_followed(client, url: str, params: dict | None = None, timeout: float = 240):
    """The response of a GET read once it is complete: the first that is not a 202 naming its job."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(url, params or {})
        if response.status_code != 202 or time.monotonic() > deadline:
            return response
        assert response.json()["complete"] is False and response.json()["job"]["id"], response.json()
        time.sleep(POLL_INTERVAL)
