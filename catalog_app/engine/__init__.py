"""The data engine: PySpark and Arrow code that reads and writes table data. It never imports Django: callers pass
plain values (paths, schemas, predicates) and get plain values or DataFrames back.

- `types`: column types: names and parsing, widening, Spark and Arrow types, values in JSON.
- `segments`: a table's data as plain values: columns, segments to read, files written, row positions.
- `warehouse`: where files live (folders per job run) and the pyarrow filesystem to reach them.
- `frames`: DataFrames to and from driver-side values (a table's Spark schema, Arrow tables, small results).
- `reads`: reading segments (deltas applied, older schemas projected), pages of rows, deleted positions.
- `writes`: writing segments and delta files, and describing them from their Parquet footers.
- `predicate_parser`: the predicate language, text to a typed AST; `predicate_columns`: an AST to a Spark Column;
  `pruning`: which segments an AST may match, from their statistics.
- `incoming`: incoming rows and files checked against a table's schema.
- `strategies`, `dml`, `keys`: write strategies, row changes and key-level changes as DataFrame transforms;
  `keymatch`: key matching on the driver with Arrow.
- `sql`, `files`, `checks`, `session`: read-only SQL, warehouse file listing, a health job, the SparkSession.
"""
