"""The `tritonkit` command line: parses, calls the library, renders. Nothing else."""
