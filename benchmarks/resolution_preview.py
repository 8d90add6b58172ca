"""The preview of a merge request's resolution (docs/merge-semantics.md#cell-picks): what a reviewer waits for when
every key of a large table conflicts and a column rule settles them.

    python benchmarks/resolution_preview.py [--rows 100000] [--repeat 5]

main holds shop.orders (a primary-key table of `--rows` rows); dev adds 1 to every amount, main 2: every key
conflicts on its amount. A merge request with the column rule `amount: greatest` is planned (its plan job run in
this process, Spark local), then the first page of its preview (`GET .../merge-requests/{n}/resolution`, 50 keys)
is asked for through Django's test client: the first call in the process and the median of `--repeat`; and a far
page: the last. The preview pages through every conflict the key comparison stored (a row each, in key order).
Then the request is merged (its merge job run here) and the audit log must count every cell the rule settled.
Uses DATABASE_URL when set, else an embedded PostgreSQL server in a throwaway folder. Prints one line per figure.
"""

import argparse
import json
import statistics

from setup import django_setup, keyed_orders, run_job, timed

django_setup()

from django.contrib.auth import get_user_model  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from catalog_app.selectors.refs import branch_get  # noqa: E402
from catalog_app.services.commits import WriteTarget  # noqa: E402
from catalog_app.services.data_submit import table_data_submit  # noqa: E402
from catalog_app.services.refs import branch_create  # noqa: E402
from merge_app.models import Merge, MergeRequest  # noqa: E402
from merge_app.services.merge_requests import (  # noqa: E402
    merge_request_merge,
    merge_request_open,
    merge_request_refresh,
    merge_request_update,
)


def planned(merge_request: MergeRequest) -> MergeRequest:
    """The request with its plan for the heads and the resolution: its plan job run here."""
    merge_request = merge_request_refresh(merge_request=MergeRequest.objects.get(id=merge_request.id), user=None)
    run_job(merge_request.plan_job)
    return MergeRequest.objects.get(id=merge_request.id)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"is_staff": True})
    main_target = keyed_orders(user, args.rows, "preview")
    catalog = main_target.catalog
    branch_create(catalog=catalog, name="dev", source="main", created_by=user)
    for branch, step in (("dev", 1), ("main", 2)):
        target = WriteTarget(catalog=catalog, branch=branch, author=user)
        update = {"set": {"amount": f"amount + {step}"}, "where": "id >= 0"}
        run_job(table_data_submit(target=target, database="shop", table="orders", kind="table_update", params=update))
    opened = merge_request_open(catalog=catalog, source="dev", target="main", title="every key", author=user)
    run_job(opened.plan_job)
    rule = {"tables": {"shop.orders": {"columns": {"amount": "greatest"}}}}
    merge_request_update(merge_request=MergeRequest.objects.get(id=opened.id), user=user, resolutions=rule)
    ms, merge_request = timed(lambda: planned(opened))
    print(f"plan with the column rule: {ms:.0f} ms")
    client = APIClient(HTTP_HOST="127.0.0.1")
    client.force_authenticate(user)
    url = f"/api/v1/catalogs/{catalog.name}/merge-requests/{merge_request.number}/resolution"

    def page(offset: int) -> dict:
        response = client.get(url, {"offset": offset, "limit": 50})
        assert response.status_code == 200, response.content[:500]
        return response.json()

    first_ms, body = timed(lambda: page(0))
    preview = body["preview"]
    assert body["current"] and preview["unresolved"] == 0, body["tables"]
    assert len(preview["keys"]) == 50 and all(k["cells"]["amount"]["rule"] == "greatest" for k in preview["keys"])
    assert preview["count"] == args.rows, preview["count"]
    print(f"conflicting keys: {body['tables'][0]['conflicts']}; listed for the preview: {preview['count']}")
    print(f"first page, first call in the process: {first_ms:.0f} ms")
    again = [timed(lambda: page(0))[0] for _ in range(args.repeat)]
    print(f"first page, median of {args.repeat}: {statistics.median(again):.0f} ms")
    far = [timed(lambda: page(preview["count"] - 50))[0] for _ in range(args.repeat)]
    print(f"last page, median of {args.repeat}: {statistics.median(far):.0f} ms")
    print(f"plan kept by the request: {len(json.dumps(merge_request.plan)) / 1e6:.2f} MB of JSON")
    ms, job = timed(lambda: merge_request_merge(merge_request=merge_request, user=user))
    ms, _ = timed(lambda: run_job(job))
    merged = Merge.objects.get(commit_id=branch_get(catalog=catalog, name="main").head_id)
    [rule] = [e for e in merged.log["resolutions"] if e.get("column") == "amount"]
    assert (rule["choice"], rule["cells"]) == ("greatest", args.rows), rule
    print(f"merge: {ms:.0f} ms; {rule['cells']} cells settled by greatest")


if __name__ == "__main__":
    main()
