"""Merge audit logs (`report`, `log`) kept as zstd-compressed JSON (`merge_app.models.LogField`). The `json` columns
become `bytea`, each row holding its JSON text as it was (the field reads both), which the server does not try to
compress again (STORAGE EXTERNAL: what the field writes is compressed already). Going back, every row is made plain
JSON text again."""

from django.db import migrations

import merge_app.models

TO_BYTES = """
ALTER TABLE merge_app_merge ALTER COLUMN {column} TYPE bytea USING convert_to({column}::text, 'UTF8'),
    ALTER COLUMN {column} SET STORAGE EXTERNAL
"""
TO_JSON = """
ALTER TABLE merge_app_merge ALTER COLUMN {column} TYPE json USING convert_from({column}, 'UTF8')::json,
    ALTER COLUMN {column} SET STORAGE EXTENDED
"""
LZ4 = """
DO $$ BEGIN
    ALTER TABLE merge_app_merge ALTER COLUMN {column} SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR syntax_error THEN NULL;
END $$
"""  # as 0010 left the `json` columns


class CompressLog(migrations.AlterField):
    """AlterField to `LogField` by casting the JSON to its bytes (Django has no cast of `json` to `bytea`)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state) -> None:
        schema_editor.execute(TO_BYTES.format(column=self.name))

    def database_backwards(self, app_label, schema_editor, from_state, to_state) -> None:
        with schema_editor.connection.cursor() as cursor:  # the rows written compressed: plain JSON text again
            cursor.execute(f"SELECT id, {self.name} FROM merge_app_merge")
            for row_id, stored in cursor.fetchall():
                text = merge_app.models.log_text(stored)
                text = text if isinstance(text, bytes) else text.encode()
                cursor.execute(f"UPDATE merge_app_merge SET {self.name} = %s WHERE id = %s", [text, row_id])
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the updates' checks run now, not at the ALTER
        schema_editor.execute(TO_JSON.format(column=self.name))
        schema_editor.execute(LZ4.format(column=self.name))


class Migration(migrations.Migration):
    dependencies = [("merge_app", "0011_merge_queue")]

    operations = [
        CompressLog(model_name="merge", name=name, field=merge_app.models.LogField(default=dict))
        for name in ("report", "log")
    ]
