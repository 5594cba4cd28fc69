"""How procedures are called: CALL parsing and binding, the runner, ``procedures.sql``/``call``, the DDL of
our catalogs and the ``procedures-sql`` console (see docs/architecture.md)."""
