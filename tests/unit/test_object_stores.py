"""Object-store FileIO without Spark: Iceberg's ``s3.*``/``gcs.*`` properties mapped to ``pyarrow.fs``
options, and bad configurations refused with a :class:`StorageConfigError` naming the property to set,
before anything is written.  The round trips run against a SeaweedFS S3 server on loopback."""

from __future__ import annotations

import socket
import time

import pyarrow.fs as pafs
import pytest

from procedures.errors import CatalogConfigError, StorageConfigError
from procedures.io.fileio import FileAlreadyExistsError, FileIO
from procedures.io.directory_walk import walk
from procedures.io.storage import filesystem_for, gcs_options, redacted, s3_options

PROPS = {
    "s3.endpoint": "http://127.0.0.1:9000",
    "s3.access-key-id": "AK",
    "s3.secret-access-key": "SK",
    "s3.session-token": "TOKEN",
    "s3.region": "eu-west-1",
    "s3.path-style-access": "true",
}


class _AcceptAll:
    def accept(self, name: str) -> bool:
        return not name.startswith(".")


# ------------------------------------------------------------------ property mapping
def test_s3_options_map_iceberg_names():
    assert s3_options(PROPS) == {
        "access_key": "AK", "secret_key": "SK", "session_token": "TOKEN", "region": "eu-west-1",
        "endpoint_override": "127.0.0.1:9000", "scheme": "http", "force_virtual_addressing": False,
    }


def test_s3_options_https_endpoint_virtual_addressing_and_default_region():
    props = {"s3.endpoint": "https://store.example:8443", "s3.access-key-id": "a", "s3.secret-access-key": "b"}
    opts = s3_options(props)
    assert opts["scheme"] == "https" and opts["endpoint_override"] == "store.example:8443"
    assert opts["region"] == "us-east-1"  # no region lookup against AWS
    assert opts["force_virtual_addressing"] is False  # custom endpoint without path-style: pyarrow's default
    assert s3_options({**props, "s3.path-style-access": "false"})["force_virtual_addressing"] is True
    assert s3_options({**props, "s3.force-virtual-addressing": "true"})["force_virtual_addressing"] is True
    assert s3_options({"s3.region": "us-west-2"}) == {"region": "us-west-2", "force_virtual_addressing": True}


def test_s3_options_timeouts_in_milliseconds():
    opts = s3_options({"s3.connect-timeout": "1500", "s3.request-timeout": "3000"})
    assert opts["connect_timeout"] == 1.5 and opts["request_timeout"] == 3.0


def test_all_s3_schemes_get_the_configured_filesystem():
    for scheme in ("s3", "s3a", "s3n"):
        fs = filesystem_for(f"{scheme}://bucket/wh", PROPS)
        assert isinstance(fs, pafs.S3FileSystem)
        assert fs.region == "eu-west-1"


def test_gcs_options():
    opts = gcs_options({"gcs.project-id": "p", "gcs.oauth2.token": "tok", "gcs.oauth2.token-expires-at": "4102444800000",
                        "gcs.service.host": "http://127.0.0.1:4443"})
    assert opts["project_id"] == "p" and opts["access_token"] == "tok"
    assert opts["endpoint_override"] == "127.0.0.1:4443" and opts["scheme"] == "http"
    assert opts["credential_token_expiration"].year == 2100
    assert isinstance(filesystem_for("gs://bucket/wh", {"gcs.project-id": "p",
                                                        "gcs.service.host": "http://127.0.0.1:4443"}),
                      pafs.GcsFileSystem)


def test_secrets_are_redacted():
    shown = redacted(PROPS)
    assert shown["s3.secret-access-key"] == "***" and shown["s3.session-token"] == "***"
    assert shown["s3.endpoint"] == PROPS["s3.endpoint"]
    text = repr(FileIO(dict(PROPS)))
    assert "SK" not in text.replace("SK'", "") and "TOKEN" not in text


# ------------------------------------------------------------------ bad configuration
def test_unknown_scheme_names_the_warehouse(tmp_path):
    io = FileIO({"warehouse": "foo://bucket/wh"})
    with pytest.raises(StorageConfigError) as err:
        io.write("foo://bucket/wh/x.json", b"{}")
    assert err.value.property == "warehouse" and "foo" in str(err.value)
    assert isinstance(err.value, CatalogConfigError)


@pytest.mark.parametrize("missing", ["s3.access-key-id", "s3.secret-access-key"])
def test_endpoint_without_credentials(missing):
    props = {k: v for k, v in PROPS.items() if k not in (missing, "s3.session-token")}
    with pytest.raises(StorageConfigError) as err:
        FileIO(props).write("s3://bucket/wh/x.json", b"{}")
    assert err.value.property == missing and missing in str(err.value)


AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


@pytest.fixture
def no_aws_environment(monkeypatch):
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_endpoint_without_any_key(no_aws_environment):
    props = {"s3.endpoint": "http://127.0.0.1:9"}
    no_aws_environment.setenv("AWS_ACCESS_KEY_ID", "only-one-of-the-two")
    with pytest.raises(StorageConfigError) as err:
        FileIO(props).exists("s3a://bucket/wh")
    assert err.value.property == "s3.access-key-id"
    text = str(err.value)
    assert "s3.access-key-id" in text and "s3.secret-access-key" in text
    assert "AWS_SECRET_ACCESS_KEY" in text and "Spark Connect" in text and "only-one-of-the-two" not in text


def test_endpoint_keys_from_the_environment(no_aws_environment):
    """Spark Connect hides secret conf keys from its clients: with an endpoint and no keys in the
    properties, both AWS variables of the environment give them; the properties' keys win."""
    env = no_aws_environment
    env.setenv("AWS_ACCESS_KEY_ID", "ENV-AK")
    env.setenv("AWS_SECRET_ACCESS_KEY", "ENV-SK")
    opts = s3_options({"s3.endpoint": "http://127.0.0.1:9000"})
    assert (opts["access_key"], opts["secret_key"]) == ("ENV-AK", "ENV-SK") and "session_token" not in opts
    env.setenv("AWS_SESSION_TOKEN", "ENV-TOKEN")
    assert s3_options({"s3.endpoint": "http://127.0.0.1:9000"})["session_token"] == "ENV-TOKEN"
    given = s3_options(PROPS)
    assert (given["access_key"], given["secret_key"], given["session_token"]) == ("AK", "SK", "TOKEN")
    with pytest.raises(StorageConfigError, match="incomplete.*Spark Connect.*AWS_SECRET_ACCESS_KEY"):
        # another access key than the environment's: its secret is not the environment's
        s3_options({"s3.endpoint": "http://127.0.0.1:9000", "s3.access-key-id": "AK"})
    # what a Spark Connect client sees of a catalog given both keys: the access key, not the secret
    seen = s3_options({"s3.endpoint": "http://127.0.0.1:9000", "s3.access-key-id": "ENV-AK"})
    assert (seen["access_key"], seen["secret_key"], seen["session_token"]) == ("ENV-AK", "ENV-SK", "ENV-TOKEN")
    with pytest.raises(StorageConfigError, match="incomplete"):  # a secret alone is never completed
        s3_options({"s3.endpoint": "http://127.0.0.1:9000", "s3.secret-access-key": "SK"})
    env.setenv("AWS_SECRET_ACCESS_KEY", "")
    with pytest.raises(StorageConfigError, match="no credentials"):
        s3_options({"s3.endpoint": "http://127.0.0.1:9000"})


def test_malformed_endpoint_and_flag():
    with pytest.raises(StorageConfigError) as err:
        s3_options({**PROPS, "s3.endpoint": "ftp://host"})
    assert err.value.property == "s3.endpoint"
    with pytest.raises(StorageConfigError) as err:
        s3_options({**PROPS, "s3.path-style-access": "maybe"})
    assert err.value.property == "s3.path-style-access"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_endpoint_names_the_endpoint():
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    io = FileIO({**PROPS, "s3.endpoint": endpoint, "s3.connect-timeout": "1000", "s3.request-timeout": "2000"})
    start = time.monotonic()
    with pytest.raises(StorageConfigError) as err:
        io.write("s3://bucket/wh/metadata/v1.metadata.json", b"{}")
    assert err.value.property == "s3.endpoint"
    assert endpoint in str(err.value) and "s3.endpoint" in str(err.value)
    assert time.monotonic() - start < 60


# ------------------------------------------------------------------ against the loopback server
def test_missing_bucket_names_bucket_and_warehouse(s3_server):
    props = {**s3_server.properties(), "warehouse": "s3://no-such-bucket/wh"}
    with pytest.raises(StorageConfigError) as err:
        FileIO(props).write("s3://no-such-bucket/wh/x.json", b"{}")
    assert err.value.property == "warehouse"
    assert "no-such-bucket" in str(err.value) and "warehouse" in str(err.value)
    raw = pafs.S3FileSystem(**s3_options(s3_server.properties()))
    assert raw.get_file_info("no-such-bucket").type == pafs.FileType.NotFound  # nothing was written


def test_wrong_secret_names_the_credentials(s3_server):
    props = {**s3_server.properties(), "s3.secret-access-key": "wrong-secret"}
    with pytest.raises(StorageConfigError) as err:
        FileIO(props).exists(f"s3://{s3_server.bucket}/wh/x.json")
    assert err.value.property == "s3.access-key-id"
    assert "wrong-secret" not in str(err.value)


def test_keys_from_the_environment_reach_the_server(s3_server, no_aws_environment):
    props = s3_server.properties()
    no_aws_environment.setenv("AWS_ACCESS_KEY_ID", props["s3.access-key-id"])
    no_aws_environment.setenv("AWS_SECRET_ACCESS_KEY", props["s3.secret-access-key"])
    keyless = {k: v for k, v in props.items() if k not in ("s3.access-key-id", "s3.secret-access-key")}
    io = FileIO(keyless)
    path = f"s3://{s3_server.bucket}/unit-env/one.bin"
    io.write(path, b"from the environment")
    assert FileIO(props).new_input(path).read() == b"from the environment"
    io.delete(path)


@pytest.mark.parametrize("scheme", ["s3", "s3a", "s3n"])
def test_round_trip(s3_server, scheme):
    io = FileIO(s3_server.properties())
    base = f"{scheme}://{s3_server.bucket}/unit-{scheme}"
    io.write(f"{base}/a/one.bin", b"1")
    io.write(f"{base}/a/b/two.bin", b"22")
    with pytest.raises(FileAlreadyExistsError) as exists:
        io.write(f"{base}/a/one.bin", b"again")
    assert exists.value.path == f"{base}/a/one.bin"
    assert io.new_input(f"{base}/a/one.bin").read() == b"1"  # not overwritten
    assert io.new_input(f"{base}/a/b/two.bin").read() == b"22"
    assert io.new_input(f"{base}/a/b/two.bin").size() == 2
    with io.new_output(f"{base}/c/three.bin").create() as out:
        out.write(b"333")
    listed = sorted(f.path for f in io.list_prefix(base))
    assert listed == [f"{base}/a/b/two.bin", f"{base}/a/one.bin", f"{base}/c/three.bin"]
    files, pending = walk([base], int(time.time() * 1000) + 60_000, _AcceptAll(), io=io)
    assert sorted(files) == listed and pending == []
    result = io.delete_many(listed, max_workers=3)
    assert result.deleted == 3 and not result.failures
    assert list(io.list_prefix(base)) == []


def _jdbc_catalog(tmp_path, warehouse: str, props: dict[str, str]):
    from procedures.catalog.config import load_catalog

    conf = {f"spark.sql.catalog.c.{k}": v for k, v in
            {"type": "jdbc", "uri": f"jdbc:sqlite:{tmp_path / 'c.db'}", "warehouse": warehouse, **props}.items()}
    cat = load_catalog("c", conf)
    cat.create_namespace(("db",))
    return cat


def _new_metadata(cat, ident):
    from procedures.core.kernel.builder import new_table_metadata
    from procedures.spec.schema import Schema
    from procedures.spec.types import LONG, NestedField

    md, _ = new_table_metadata(schema=Schema((NestedField(1, "id", LONG, True),)),
                               location=cat.default_table_location(ident))
    return md


def test_catalog_with_missing_bucket_creates_nothing(s3_server, tmp_path):
    cat = _jdbc_catalog(tmp_path, "s3://no-such-bucket/wh", s3_server.properties())
    with pytest.raises(StorageConfigError) as err:
        cat.create_table(("db", "t"), _new_metadata(cat, ("db", "t")))
    assert err.value.property == "warehouse" and "s3://no-such-bucket/wh" in str(err.value)
    assert not cat.table_exists(("db", "t"))


def test_catalog_with_unknown_scheme_creates_nothing(tmp_path):
    cat = _jdbc_catalog(tmp_path, "foo://bucket/wh", {})
    with pytest.raises(StorageConfigError) as err:
        cat.create_table(("db", "t"), _new_metadata(cat, ("db", "t")))
    assert err.value.property == "warehouse"
    assert not cat.table_exists(("db", "t"))


def test_catalog_round_trip_in_bucket(s3_server, tmp_path):
    cat = _jdbc_catalog(tmp_path, f"s3a://{s3_server.bucket}/cat-wh", s3_server.properties())
    t = cat.create_table(("db", "t"), _new_metadata(cat, ("db", "t")))
    assert t.metadata_location.startswith(f"s3a://{s3_server.bucket}/cat-wh/")
    assert cat.load_table(("db", "t")).metadata.table_uuid == t.metadata.table_uuid
    cat.drop_table(("db", "t"), purge=True)
    assert list(cat.io.list_prefix(f"s3a://{s3_server.bucket}/cat-wh/db/t")) == []


def test_spark_redacted_secrets_are_read_from_the_runtime_conf():
    """Spark's SET shows secret values as ``*********(redacted)``; the catalog must get the real value."""
    from procedures.catalog.config import catalog_properties
    from procedures.spark.catalog_conf import conf_from_spark

    values = {"spark.sql.catalog.c.type": "jdbc", "spark.sql.catalog.c.s3.secret-access-key": "real-secret"}

    class Runtime:
        def get(self, key, default=None):
            return values.get(key, default)

    class Context:
        def getConf(self):
            return type("Conf", (), {"getAll": lambda _self: []})()

    class Session:
        conf = Runtime()
        sparkContext = Context()

        def sql(self, text):
            assert text == "SET"
            rows = [(k, "*********(redacted)" if "secret" in k else v) for k, v in values.items()]
            return type("Rows", (), {"collect": lambda _self: rows})()

    conf = conf_from_spark(Session())
    props, _ = catalog_properties("c", conf)
    assert props["s3.secret-access-key"] == "real-secret"


def test_spark_conf_falls_back_to_set_when_the_jvm_route_fails():
    """A classic session's conf is read from its JVM in one JSON text; when that fails (a JVM without
    the classes, a gateway error), SET gives the same entries."""
    from procedures.spark.catalog_conf import conf_from_spark

    class Broken:
        def __getattr__(self, name):
            raise RuntimeError(f"py4j says no to {name}")

    class Session:
        conf = None
        sparkContext = None
        _jvm = Broken()
        _jsparkSession = Broken()

        def sql(self, text):
            rows = [("spark.master", "local[2]"), ("spark.sql.catalog.c.type", "hadoop")]
            return type("Rows", (), {"collect": lambda _self: rows})()

    assert conf_from_spark(Session()) == {"spark.master": "local[2]", "spark.sql.catalog.c.type": "hadoop"}


def test_spark_conf_is_one_read_of_set_without_the_context_copy():
    """On pyspark 3.5 classic, SET already lists the context's static keys (a session's SQL conf
    starts as a copy of them); copying the context's conf as well cost a py4j round trip per entry
    on every statement.  The copy is only the fallback for a session whose SET cannot be read."""
    from procedures.spark.catalog_conf import conf_from_spark

    copies = []

    class Context:
        def getConf(self):
            copies.append(1)
            return type("Conf", (), {"getAll": lambda _self: [("spark.master", "local[2]"), ("spark.app.name", "a")]})()

    class Session:
        conf = None
        sparkContext = Context()
        fail = False

        def sql(self, text):
            if self.fail:
                raise RuntimeError("no SQL here")
            rows = [("spark.master", "local[2]"), ("spark.sql.catalog.c.type", "hadoop")]
            return type("Rows", (), {"collect": lambda _self: rows})()

    assert conf_from_spark(Session()) == {"spark.master": "local[2]", "spark.sql.catalog.c.type": "hadoop"}
    assert copies == []
    failing = Session()
    failing.fail = True
    assert conf_from_spark(failing) == {"spark.master": "local[2]", "spark.app.name": "a"}
    assert copies == [1]
