"""The ``data_rewrite`` capability: ``rewrite_data_files`` (:mod:`.compaction`) and
``rewrite_position_delete_files`` (:mod:`.position_deletes`), each ``Params`` -> ``plan(metadata,
params)`` (options validated once, :mod:`.options`; the rewriter chosen once, :mod:`.rewriter`) ->
``execute(table, plan, engine)`` on the steps of :class:`.engine.DataRewriteEngine`; file groups
are planned by :mod:`.grouping`; :mod:`.arrow_sort`, :mod:`.external_sort` and :mod:`.zorder` are
the engine-free sorting pieces the engine's group rewrite uses."""
