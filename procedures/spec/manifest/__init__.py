"""Manifests and manifest lists (spec "Manifests", "Manifest Lists", "Sequence Number Inheritance",
"First Row ID Inheritance"; on-disk notes sections 1-3 and 9), one module per concern:

* :mod:`~procedures.spec.manifest.model` -- ``DataFile``, ``ManifestEntry``, ``ManifestFile``,
  ``FieldSummary`` and the content, status and format enums (no Avro);
* :mod:`~procedures.spec.manifest.reader` -- reading a manifest's entries, inheritance applied
  (``read_manifest``; ``read_manifest_where`` decodes only the entries a metrics filter keeps);
* :mod:`~procedures.spec.manifest.writer` -- ``ManifestWriter``, whole or in parts;
* :mod:`~procedures.spec.manifest.manifest_list` -- writing and reading manifest lists;
* :mod:`~procedures.spec.manifest.avro_container` -- the Avro container files under all of them.

Import each name from its module.  This package re-exports nothing, so every name has one home and
a module that needs only the model (most of ``io``) does not load the Avro readers and writers.
Engine optimisations over the same bytes live with the capability that uses them:
:mod:`procedures.core.gc.live_paths` (garbage collection's path skimmer) and
:mod:`procedures.core.manifest_rewrite.entry_copy` (rewrite_manifests' byte-level entry copy).
"""
