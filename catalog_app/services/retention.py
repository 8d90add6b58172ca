"""Retention (docs/retention.md): a catalog's rules, and expiry by them.

Expiry marks commits expired and files reclaimed; it deletes no metadata row, so every kept commit reads exactly as
before and the commit graph stays whole for merges. Garbage collection then removes the reclaimed files from the
warehouse. Expiry decides under the catalog's lock taken exclusively (`catalog_lock`: every commit takes it, and
a branch or tag create holds the catalog against it, `catalog_refs_hold`), on the refs and commits as they are
then: a load, merge or restore that read a head before commits after it (its head was kept), and one that commits
a reclaimed file again keeps it from GC (`ReclaimedFile.upto_seq`).
"""

from datetime import datetime

from django.db import connection, transaction

from catalog_app.models import Catalog, ExpiredCommit, ReclaimedFile, RetentionRule
from catalog_app.selectors.retention import Expiry, Rule, refs_snapshot, retention_expiry, rules_get
from catalog_app.services.commits import catalog_lock
from lakeui.errors import ApplicationError
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_create

EXPIRE_JOB = "retention_expire"
MAX_RULES = 100
MAX_KEEP = 1_000_000
BATCH = 50_000


def rules_parse(rules: object) -> list[Rule]:
    """Rules as the API takes them, `[{pattern, keep_days?, keep_commits?}]`, checked."""
    if not isinstance(rules, list) or len(rules) > MAX_RULES:
        raise ApplicationError("invalid_rules", f"rules must be a list of at most {MAX_RULES} rules.")
    parsed = []
    for index, rule in enumerate(rules):
        where = f"rules[{index}]"
        if not isinstance(rule, dict) or set(rule) - {"pattern", "keep_days", "keep_commits"}:
            raise ApplicationError("invalid_rules", f"{where} must be {{pattern, keep_days?, keep_commits?}}.")
        pattern = rule.get("pattern")
        if not isinstance(pattern, str) or not 0 < len(pattern) <= 255 or not pattern.isprintable():
            raise ApplicationError("invalid_rules", f"{where}.pattern must be a ref name pattern of 1-255 characters.")
        keep = {}
        for name, low in (("keep_days", 0), ("keep_commits", 1)):
            value = rule.get(name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_KEEP
            ):
                raise ApplicationError(
                    "invalid_rules", f"{where}.{name} must be a whole number from {low} to {MAX_KEEP}."
                )
            keep[name] = value
        parsed.append(Rule(pattern, **keep))
    return parsed


@transaction.atomic
def rules_set(*, catalog: Catalog, rules: object) -> list[Rule]:
    """Replace the catalog's rules (an empty list: keep everything). Nothing expires until an expiry runs."""
    parsed = rules_parse(rules)
    RetentionRule.objects.filter(catalog=catalog).delete()
    RetentionRule.objects.bulk_create(
        RetentionRule(
            catalog=catalog, position=i, pattern=r.pattern, keep_days=r.keep_days, keep_commits=r.keep_commits
        )
        for i, r in enumerate(parsed)
    )
    return parsed


def retention_preview(*, catalog: Catalog, rules: object = None) -> Expiry:
    """What an expiry would do now by the given rules (default: the saved ones). Changes nothing."""
    return retention_expiry(catalog=catalog, rules=rules_get(catalog=catalog) if rules is None else rules_parse(rules))


def expire_submit(*, catalog: Catalog, user=None) -> Job:
    """The expiry job, once the saved rules are known to be ones an expiry can apply (else refused, no job)."""
    rules_parse([rule.as_dict() for rule in rules_get(catalog=catalog)])
    return job_create(kind=EXPIRE_JOB, params={"catalog_id": str(catalog.id)}, requested_by=user)


def retention_expire(*, catalog: Catalog, now: datetime | None = None) -> Expiry:
    """Expire by the saved rules as of `now` (default: now): planned first, then, under the catalog lock, planned
    again if any commit, branch or tag changed meanwhile, and recorded."""
    rules = rules_get(catalog=catalog)
    plan = retention_expiry(catalog=catalog, rules=rules, now=now)
    with transaction.atomic():
        catalog_lock(catalog=catalog, exclusive=True)  # no commit, branch or tag create meanwhile
        moved = refs_snapshot(catalog.id) != plan.snapshot
        fresh = retention_expiry(catalog=catalog, rules=rules, now=plan.now) if moved else plan
        _insert(ExpiredCommit, "commit_id", sorted(fresh.expiring), catalog, None)
        _insert(ReclaimedFile, "file_id", sorted(fresh.reclaimed), catalog, fresh.last_seq)
    return fresh


def _insert(model, key: str, ids: list[str], catalog: Catalog, upto_seq: int | None) -> None:
    """Many rows in few statements (an expiry may reclaim a million files)."""
    table = model._meta.db_table
    cast = "uuid" if key == "file_id" else "text"
    extra_cols, extra_vals = (", upto_seq", ", %s") if upto_seq is not None else ("", "")
    stamp = "reclaimed_at" if upto_seq is not None else "expired_at"
    with connection.cursor() as cursor:
        for start in range(0, len(ids), BATCH):
            params = [catalog.id, *([upto_seq] if upto_seq is not None else []), ids[start : start + BATCH]]
            cursor.execute(
                f"INSERT INTO {table} ({key}, catalog_id{extra_cols}, {stamp})"
                f" SELECT k, %s{extra_vals}, now() FROM unnest(%s::{cast}[]) AS k ON CONFLICT DO NOTHING",
                params,
            )


def expire_scheduled(*, catalog_name: str | None = None) -> list[tuple[str, Job]]:
    """One expiry job per catalog with rules (the scheduled run, `manage.py lakeui_retention`)."""
    catalogs = Catalog.objects.filter(id__in=RetentionRule.objects.values("catalog_id")).order_by("name")
    if catalog_name is not None:
        catalogs = catalogs.filter(name=catalog_name)
    return [(catalog.name, expire_submit(catalog=catalog)) for catalog in catalogs]
