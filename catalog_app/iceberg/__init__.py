"""The Iceberg REST catalog (read-only) over LakeUI's refs: what it lists (selectors) and the table metadata it
writes into the warehouse once per table state (services). The views are in catalog_app/apis/iceberg.py."""
