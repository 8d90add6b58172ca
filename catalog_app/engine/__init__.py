"""The data engine: PySpark code that reads and writes table data. It never imports Django: callers pass plain
values (paths, schemas, predicates) and get plain values or DataFrames back."""
