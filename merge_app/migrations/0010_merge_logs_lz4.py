"""Merge audit logs compressed with lz4 where the server has it (PostgreSQL 14 on, built with lz4): a merge of
10,000 tables logs some 13 MB of JSON, which the default (pglz) took 0.1-0.15 s longer to compress, inside the
merge's transaction. A server without lz4 keeps pglz."""

from django.db import migrations

LZ4 = """
DO $$ BEGIN
    ALTER TABLE merge_app_merge ALTER COLUMN report SET COMPRESSION lz4, ALTER COLUMN log SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR syntax_error THEN NULL;
END $$;
"""
PGLZ = """
DO $$ BEGIN
    ALTER TABLE merge_app_merge ALTER COLUMN report SET COMPRESSION pglz, ALTER COLUMN log SET COMPRESSION pglz;
EXCEPTION WHEN feature_not_supported OR syntax_error THEN NULL;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("merge_app", "0009_merge_logs_as_json")]

    operations = [migrations.RunSQL(LZ4, PGLZ)]
