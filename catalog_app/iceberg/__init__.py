"""The Iceberg REST catalog over LakeUI's refs (reads at every ref, writes at a branch): what it lists (selectors)
and the table metadata it writes into the warehouse once per table state (services). The views are in
catalog_app/apis/iceberg.py."""
