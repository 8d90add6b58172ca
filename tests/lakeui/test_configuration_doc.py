"""docs/configuration.md lists every environment variable the code reads, and no variable the code does not know."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = [
    "lakeui",
    "catalog_app",
    "merge_app",
    "checks_app",
    "hooks_app",
    "frontend",
    "manage.py",
    "clients/python/src",
]
# A read of one variable: through the settings' reader (`env.int("X", ...)`, `Env(env).str("X", ...)`), os.environ,
# gunicorn_conf's `_flag("X", ...)`, a click option's `envvar="X"` or `spark_conf(ENV, "X")`.
READ = re.compile(
    r"(?:\b(?:env|Env\(env\))\.(?:str|bool|int|float|list)\(|environ\.get\(|environ\[|getenv\(|_flag\(|envvar=|"
    r'spark_conf\(ENV,\s*)\s*"([A-Z][A-Z0-9_]+)"'
)
DOC = (ROOT / "docs" / "configuration.md").read_text()


def _python_files(*roots: str) -> list[Path]:
    return [f for root in roots for f in ([ROOT / root] if root.endswith(".py") else (ROOT / root).rglob("*.py"))]


def _read_in(*roots: str) -> set[str]:
    return {name for f in _python_files(*roots) for name in READ.findall(f.read_text())}


def test_the_scan_finds_the_reads_it_must():
    """The pattern itself: it sees a read split over lines, a flag, a click option and the settings' helpers."""
    names = _read_in(*RUNTIME)
    assert {"LAKEUI_WEBHOOK_RETRY_DELAYS", "LAKEUI_WEB_REUSE_PORT", "LAKEUI_WEBHOOK_SECRET", "LAKEUI_SPARK_CONF",
            "DATABASE_URL", "REDIS_URL", "LAKEUI_WAREHOUSE", "LAKEUI_REVIEWER_PASSWORD", "WEB_CONCURRENCY"} <= names  # fmt: skip


def test_every_variable_the_code_reads_is_documented():
    read = _read_in(*RUNTIME) | {name for name in _read_in("tests") if name.startswith("LAKEUI_")}
    missing = sorted(name for name in read if f"`{name}`" not in DOC)
    assert not missing, f"read by the code but not in docs/configuration.md: {missing}"


def test_every_documented_variable_is_read_somewhere():
    documented = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", DOC, flags=re.M))
    assert len(documented) > 40
    code = "\n".join(f.read_text() for f in _python_files(*RUNTIME, "tests", "benchmarks"))
    code += (ROOT / "Makefile").read_text() + (ROOT / "docker" / "docker-compose.yml").read_text()
    # Spark's and click's own, read by those libraries: the code only sets or names them.
    stale = sorted(name for name in documented - {"XDG_CONFIG_HOME"} if name not in code)
    assert not stale, f"in docs/configuration.md but read nowhere: {stale}"
