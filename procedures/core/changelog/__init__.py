"""The ``changelog`` capability: ``create_changelog_view`` (:mod:`.changes`: params, plan, execute, the
snapshot range, change planning and the row rules) on the steps of :class:`.engine.ChangelogEngine`;
:mod:`.change_model` holds what the capability and its engine share."""
