"""The data engine: PySpark and Arrow code that reads and writes table data. It never imports Django: callers pass
plain values (paths, schemas, predicates, the typed job specs of `catalog_app.job_specs`) and get plain values back
(files written, counts), or a DataFrame they only pass on (`frames.Frame`).

- `types`: column types: names and parsing, widening, Spark and Arrow types, values in JSON.
- `segments`: a table's data as plain values: columns, segments to read, files written, row positions.
- `warehouse`: where files live (folders per job run) and the pyarrow filesystem to reach them.
- `frames`: DataFrames to and from driver-side values (a table's Spark schema, Arrow tables, small results).
- `reads`: reading segments (deltas applied, older schemas projected), pages of rows, deleted positions.
- `writes`: writing segments and delta files, and describing them from their Parquet footers.
- `table_data`: one table's data as a job reads and writes it (`TableData`: warehouse, folder, columns, partitions).
- `predicate_parser`: the predicate language, text to a typed AST; `predicate_columns`: an AST to a Spark Column;
  `predicate_arrow`: an AST evaluated with pyarrow, where Arrow gives exactly Spark's result; `pruning`: which
  segments an AST may match, from their statistics.
- `incoming`: incoming rows and files checked against a table's schema.
- `strategies`, `dml`, `keys`: write strategies, row changes and key-level changes as DataFrame transforms;
  `keymatch`: key matching on the driver with Arrow.
- `loads`: a load's Spark and Arrow work, incoming rows to files written; `dml`: also the delete, update and
  compaction jobs' (`Matched`: the rows a predicate matches, as Arrow positions or a cached frame); `dml_arrow`:
  small deletes and updates matched, computed and written with pyarrow, no Spark job; `spark_hash`: Spark's
  xxhash64, which names a partition's folder.
- `gc`: removing a catalog's unreferenced files from the warehouse.
- `sql`, `files`, `checks`, `session`: read-only SQL, warehouse file listing, a health job, the SparkSession (and
  Spark's errors: its data refusals, a lost JVM).
"""
