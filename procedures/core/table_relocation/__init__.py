"""The ``table_relocation`` capability: ``rewrite_table_path`` (:mod:`.relocation`: params, plan,
execute and the path rules) on the steps of :class:`.engine.TableRelocationEngine`."""
