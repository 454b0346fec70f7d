"""What a flow needs to run: its plan, its code, the catalog of known and stored flows."""
