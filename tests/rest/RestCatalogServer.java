// A REST catalog server for the tests: Iceberg Java's own server-side handlers
// (org.apache.iceberg.rest.CatalogHandlers, with the spec's requirement checks) over Iceberg's
// JdbcCatalog (SQLite), behind the JDK's HTTP server, on 127.0.0.1.  Started by tests/rest_server.py
// with `java -cp <iceberg runtime jar>:<hadoop jars>:<sqlite driver> RestCatalogServer.java`
// (source-file launch: nothing is compiled into the repository).
//
// Arguments (key=value): port-file=<path> (the chosen port is written there once listening),
// warehouse=<path>, jdbc=<jdbc url>, prefix=<prefix or empty>, credential=<id:secret> (turns on
// OAuth2 client-credentials checking: every call but /v1/config and the token endpoint needs
// "Authorization: Bearer <token>"), token-seconds=<lifetime of issued tokens>, token=<a static token
// also accepted>, table-config.<key>=<value> (returned in every LoadTableResult's config, as a
// server vending storage credentials does), fail-commits=<n> (answer the next n commits with 503,
// after applying none; fail-commits-after=<k> lets the first k commits through first),
// endpoints=<comma list or "all">, credentials-only=true (the table config is served only by the
// credentials endpoint, not with the table), s3-filer=<http://host:port of a SeaweedFS filer> (s3://bucket/key
// paths are then read and written through that filer's HTTP API, which serves the S3 buckets'
// objects under /buckets/<bucket>/: the server needs no AWS SDK, which the runtime jar lacks).
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.AlreadyExistsException;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.exceptions.CommitStateUnknownException;
import org.apache.iceberg.exceptions.ForbiddenException;
import org.apache.iceberg.exceptions.NamespaceNotEmptyException;
import org.apache.iceberg.exceptions.NoSuchNamespaceException;
import org.apache.iceberg.exceptions.NoSuchTableException;
import org.apache.iceberg.exceptions.NotAuthorizedException;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.hadoop.HadoopFileIO;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.InputFile;
import org.apache.iceberg.io.OutputFile;
import org.apache.iceberg.io.PositionOutputStream;
import org.apache.iceberg.io.SeekableInputStream;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.CatalogHandlers;
import org.apache.iceberg.rest.Endpoint;
import org.apache.iceberg.rest.RESTSerializers;
import org.apache.iceberg.rest.requests.CreateNamespaceRequest;
import org.apache.iceberg.rest.requests.CreateTableRequest;
import org.apache.iceberg.rest.requests.RegisterTableRequest;
import org.apache.iceberg.rest.requests.RenameTableRequest;
import org.apache.iceberg.rest.requests.UpdateNamespacePropertiesRequest;
import org.apache.iceberg.rest.requests.UpdateTableRequest;
import org.apache.iceberg.rest.responses.ConfigResponse;
import org.apache.iceberg.rest.responses.ErrorResponse;
import org.apache.iceberg.rest.responses.LoadTableResponse;
import org.apache.iceberg.rest.responses.OAuthTokenResponse;
import org.apache.iceberg.shaded.com.fasterxml.jackson.annotation.JsonAutoDetect;
import org.apache.iceberg.shaded.com.fasterxml.jackson.annotation.PropertyAccessor;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.DeserializationFeature;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.PropertyNamingStrategies;

public class RestCatalogServer {
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private final JdbcCatalog catalog;
  private final Map<String, String> args;
  private final String prefix;
  private final Map<String, Long> tokens = new ConcurrentHashMap<>();
  private final Map<String, String> tableConfig = new HashMap<>();
  private final AtomicInteger failCommits;
  private final AtomicInteger passCommits;
  private final AtomicInteger requests = new AtomicInteger();

  RestCatalogServer(Map<String, String> args) {
    this.args = args;
    this.prefix = args.getOrDefault("prefix", "");
    this.failCommits = new AtomicInteger(Integer.parseInt(args.getOrDefault("fail-commits", "0")));
    this.passCommits = new AtomicInteger(Integer.parseInt(args.getOrDefault("fail-commits-after", "0")));
    for (Map.Entry<String, String> e : args.entrySet()) {
      if (e.getKey().startsWith("table-config.")) {
        tableConfig.put(e.getKey().substring("table-config.".length()), e.getValue());
      }
    }
    Map<String, String> props = new HashMap<>();
    props.put(CatalogProperties.URI, args.get("jdbc"));
    props.put(CatalogProperties.WAREHOUSE_LOCATION, args.get("warehouse"));
    props.put("jdbc.schema-version", "V1");
    String filer = args.get("s3-filer");
    catalog = filer == null ? new JdbcCatalog() : new JdbcCatalog(p -> new FilerFileIO(filer), null, true);
    catalog.setConf(new Configuration());
    catalog.initialize("rest_backend", props);
  }

  public static void main(String[] argv) throws Exception {
    MAPPER.setVisibility(PropertyAccessor.FIELD, JsonAutoDetect.Visibility.ANY);
    MAPPER.configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
    MAPPER.setPropertyNamingStrategy(PropertyNamingStrategies.KEBAB_CASE);
    RESTSerializers.registerAll(MAPPER);
    Map<String, String> args = new HashMap<>();
    for (String a : argv) {
      int eq = a.indexOf('=');
      args.put(a.substring(0, eq), a.substring(eq + 1));
    }
    RestCatalogServer server = new RestCatalogServer(args);
    HttpServer http = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
    http.createContext("/", server::handle);
    http.setExecutor(Executors.newFixedThreadPool(8));
    http.start();
    Path portFile = Path.of(args.get("port-file"));
    Path tmp = portFile.resolveSibling(portFile.getFileName() + ".tmp");
    Files.writeString(tmp, Integer.toString(http.getAddress().getPort()));
    Files.move(tmp, portFile);
  }

  private void handle(HttpExchange ex) throws IOException {
    requests.incrementAndGet();
    try {
      Object body = route(ex);
      if (body == null) {
        ex.sendResponseHeaders(204, -1);
      } else {
        send(ex, 200, body);
      }
    } catch (HttpError e) {
      error(ex, e.code, e.type, e.getMessage());
    } catch (NoSuchNamespaceException e) {
      error(ex, 404, "NoSuchNamespaceException", e.getMessage());
    } catch (NoSuchTableException e) {
      error(ex, 404, "NoSuchTableException", e.getMessage());
    } catch (AlreadyExistsException e) {
      error(ex, 409, "AlreadyExistsException", e.getMessage());
    } catch (NamespaceNotEmptyException e) {
      error(ex, 409, "NamespaceNotEmptyException", e.getMessage());
    } catch (CommitFailedException e) {
      error(ex, 409, "CommitFailedException", e.getMessage());
    } catch (CommitStateUnknownException e) {
      error(ex, 500, "CommitStateUnknownException", e.getMessage());
    } catch (NotAuthorizedException e) {
      error(ex, 401, "NotAuthorizedException", e.getMessage());
    } catch (ForbiddenException e) {
      error(ex, 403, "ForbiddenException", e.getMessage());
    } catch (ValidationException | IllegalArgumentException e) {
      error(ex, 400, "BadRequestException", e.getMessage());
    } catch (UnsupportedOperationException e) {
      error(ex, 406, "UnsupportedOperationException", e.getMessage());
    } catch (RuntimeException e) {
      error(ex, 500, e.getClass().getSimpleName(), String.valueOf(e.getMessage()));
    } finally {
      ex.close();
    }
  }

  private static final class HttpError extends RuntimeException {
    final int code;
    final String type;

    HttpError(int code, String type, String message) {
      super(message);
      this.code = code;
      this.type = type;
    }
  }

  private Object route(HttpExchange ex) throws IOException {
    String method = ex.getRequestMethod();
    String rawPath = ex.getRequestURI().getRawPath();
    Map<String, String> query = query(ex.getRequestURI().getRawQuery());
    List<String> parts = new ArrayList<>();
    for (String p : rawPath.split("/")) {
      if (!p.isEmpty()) {
        parts.add(URLDecoder.decode(p, StandardCharsets.UTF_8));
      }
    }
    if (parts.size() < 2 || !parts.get(0).equals("v1")) {
      throw new HttpError(404, "NotFound", "no route " + rawPath);
    }
    parts = parts.subList(1, parts.size());
    if (method.equals("POST") && parts.equals(List.of("oauth", "tokens"))) {
      return token(ex);
    }
    if (method.equals("GET") && parts.equals(List.of("config"))) {
      return config(query);
    }
    authorize(ex);
    if (!prefix.isEmpty()) {
      if (parts.isEmpty() || !parts.get(0).equals(prefix)) {
        throw new HttpError(404, "NotFound", "unknown prefix in " + rawPath);
      }
      parts = parts.subList(1, parts.size());
    }
    String p0 = parts.isEmpty() ? "" : parts.get(0);
    if (p0.equals("tables") && parts.size() == 2 && parts.get(1).equals("rename") && method.equals("POST")) {
      CatalogHandlers.renameTable(catalog, read(ex, RenameTableRequest.class));
      return null;
    }
    if (!p0.equals("namespaces")) {
      throw new HttpError(404, "NotFound", "no route " + rawPath);
    }
    if (parts.size() == 1) {
      if (method.equals("GET")) {
        String parent = query.get("parent");
        Namespace ns = parent == null ? Namespace.empty() : namespace(parent);
        return CatalogHandlers.listNamespaces(catalog, ns);
      }
      if (method.equals("POST")) {
        return CatalogHandlers.createNamespace(catalog, read(ex, CreateNamespaceRequest.class));
      }
    }
    Namespace ns = namespace(parts.get(1));
    if (parts.size() == 2) {
      switch (method) {
        case "GET":
          return CatalogHandlers.loadNamespace(catalog, ns);
        case "HEAD":
          CatalogHandlers.namespaceExists(catalog, ns);
          return null;
        case "DELETE":
          CatalogHandlers.dropNamespace(catalog, ns);
          return null;
        default:
          break;
      }
    }
    if (parts.size() == 3 && parts.get(2).equals("properties") && method.equals("POST")) {
      return CatalogHandlers.updateNamespaceProperties(catalog, ns, read(ex, UpdateNamespacePropertiesRequest.class));
    }
    if (parts.size() == 3 && parts.get(2).equals("register") && method.equals("POST")) {
      return withConfig(CatalogHandlers.registerTable(catalog, ns, read(ex, RegisterTableRequest.class)));
    }
    if (parts.size() >= 3 && parts.get(2).equals("tables")) {
      if (parts.size() == 3) {
        if (method.equals("GET")) {
          return CatalogHandlers.listTables(catalog, ns);
        }
        if (method.equals("POST")) {
          CreateTableRequest request = read(ex, CreateTableRequest.class);
          return withConfig(request.stageCreate()
              ? CatalogHandlers.stageTableCreate(catalog, ns, request)
              : CatalogHandlers.createTable(catalog, ns, request));
        }
      }
      TableIdentifier ident = TableIdentifier.of(ns, parts.get(3));
      if (parts.size() == 4) {
        switch (method) {
          case "GET":
            return withConfig(CatalogHandlers.loadTable(catalog, ident));
          case "HEAD":
            CatalogHandlers.tableExists(catalog, ident);
            return null;
          case "DELETE":
            if ("true".equals(query.get("purgeRequested"))) {
              CatalogHandlers.purgeTable(catalog, ident);
            } else {
              CatalogHandlers.dropTable(catalog, ident);
            }
            return null;
          case "POST":
            UpdateTableRequest update = read(ex, UpdateTableRequest.class);
            if (passCommits.getAndUpdate(n -> Math.max(0, n - 1)) == 0
                && failCommits.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
              throw new HttpError(503, "ServiceUnavailableException", "commit refused by the test server (fail-commits)");
            }
            return withConfig(CatalogHandlers.updateTable(catalog, ident, update));
          default:
            break;
        }
      }
      if (parts.size() == 5 && parts.get(4).equals("credentials") && method.equals("GET")) {
        Map<String, Object> body = new HashMap<>();
        List<Map<String, Object>> creds = new ArrayList<>();
        if (!tableConfig.isEmpty()) {
          Map<String, Object> one = new HashMap<>();
          one.put("prefix", catalog.loadTable(ident).location());
          one.put("config", tableConfig);
          creds.add(one);
        }
        body.put("storage-credentials", creds);
        return body;
      }
    }
    throw new HttpError(405, "MethodNotAllowed", method + " " + rawPath);
  }

  private Object config(Map<String, String> query) {
    String warehouse = query.get("warehouse");
    if (warehouse != null && args.containsKey("known-warehouse") && !warehouse.equals(args.get("known-warehouse"))) {
      throw new HttpError(400, "BadRequestException", "unknown warehouse " + warehouse);
    }
    ConfigResponse.Builder builder = ConfigResponse.builder();
    if (!prefix.isEmpty()) {
      builder.withOverride("prefix", prefix);
    }
    String endpoints = args.getOrDefault("endpoints", "all");
    if (!endpoints.equals("all")) {
      List<Endpoint> list = new ArrayList<>();
      for (String e : endpoints.split(",")) {
        if (!e.isBlank()) {
          list.add(Endpoint.fromString(e.trim()));
        }
      }
      builder.withEndpoints(list);
    }
    return builder.build();
  }

  private Object token(HttpExchange ex) throws IOException {
    String form = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
    Map<String, String> fields = query(form);
    String credential = args.get("credential");
    String expected = credential == null ? null : credential;
    String given = fields.getOrDefault("client_id", "") + ":" + fields.getOrDefault("client_secret", "");
    if (expected != null && !expected.equals(given)) {
      Map<String, Object> body = new HashMap<>();
      body.put("error", "invalid_client");
      body.put("error_description", "bad client credentials");
      send(ex, 401, body);
      throw new HttpError(401, "sent", "");
    }
    String token = "t-" + UUID.randomUUID();
    int seconds = Integer.parseInt(args.getOrDefault("token-seconds", "3600"));
    tokens.put(token, System.currentTimeMillis() + seconds * 1000L);
    OAuthTokenResponse.Builder builder = OAuthTokenResponse.builder().withToken(token).withTokenType("bearer")
        .withIssuedTokenType("urn:ietf:params:oauth:token-type:access_token").setExpirationInSeconds(seconds);
    String scope = fields.get("scope");
    if (scope != null) {
      builder.addScopes(Arrays.asList(scope.split(" ")));
    }
    return builder.build();
  }

  private void authorize(HttpExchange ex) {
    if (!args.containsKey("credential") && !args.containsKey("token")) {
      return;
    }
    String header = ex.getRequestHeaders().getFirst("Authorization");
    if (header == null || !header.startsWith("Bearer ")) {
      throw new NotAuthorizedException("Not authorized: no bearer token");
    }
    String token = header.substring("Bearer ".length());
    if (token.equals(args.get("token"))) {
      return;
    }
    Long expiry = tokens.get(token);
    if (expiry == null || expiry < System.currentTimeMillis()) {
      throw new NotAuthorizedException("Not authorized: unknown or expired token");
    }
  }

  private LoadTableResponse withConfig(LoadTableResponse response) {
    if (tableConfig.isEmpty() || "true".equals(args.get("credentials-only"))) {
      return response;
    }
    return LoadTableResponse.builder().withTableMetadata(response.tableMetadata()).addAllConfig(response.config())
        .addAllConfig(tableConfig).build();
  }

  private static Namespace namespace(String encoded) {
    return Namespace.of(encoded.split("\u001f"));
  }

  private static Map<String, String> query(String raw) {
    Map<String, String> out = new HashMap<>();
    if (raw == null || raw.isEmpty()) {
      return out;
    }
    for (String pair : raw.split("&")) {
      int eq = pair.indexOf('=');
      String k = eq < 0 ? pair : pair.substring(0, eq);
      String v = eq < 0 ? "" : pair.substring(eq + 1);
      out.put(URLDecoder.decode(k, StandardCharsets.UTF_8), URLDecoder.decode(v, StandardCharsets.UTF_8));
    }
    return out;
  }

  private static <T> T read(HttpExchange ex, Class<T> cls) throws IOException {
    try (InputStream in = ex.getRequestBody()) {
      return MAPPER.readValue(in, cls);
    } catch (IOException e) {
      throw new HttpError(400, "BadRequestException", "malformed request body: " + e.getMessage());
    }
  }

  private static void send(HttpExchange ex, int code, Object body) throws IOException {
    byte[] bytes = MAPPER.writeValueAsBytes(body);
    ex.getResponseHeaders().set("Content-Type", "application/json");
    ex.sendResponseHeaders(code, bytes.length);
    try (OutputStream out = ex.getResponseBody()) {
      out.write(bytes);
    }
  }

  private static void error(HttpExchange ex, int code, String type, String message) throws IOException {
    if ("sent".equals(type)) {
      return;
    }
    ErrorResponse body = ErrorResponse.builder().responseCode(code).withType(type).withMessage(message).build();
    send(ex, code, body);
  }

  /** s3://bucket/key through a SeaweedFS filer's HTTP API; other paths through HadoopFileIO. */
  static final class FilerFileIO implements FileIO {
    private final String filer;
    private final HadoopFileIO local = new HadoopFileIO(new Configuration());
    private transient HttpClient http;

    FilerFileIO(String filer) {
      this.filer = filer.replaceAll("/+$", "");
    }

    private HttpClient http() {
      if (http == null) {
        http = HttpClient.newHttpClient();
      }
      return http;
    }

    private static boolean isS3(String path) {
      return path.startsWith("s3://") || path.startsWith("s3a://");
    }

    private URI uri(String path) {
      String rest = path.substring(path.indexOf("://") + 3);
      return URI.create(filer + "/buckets/" + rest);
    }

    private byte[] get(String path) {
      try {
        HttpResponse<byte[]> r = http().send(HttpRequest.newBuilder(uri(path)).GET().build(),
            HttpResponse.BodyHandlers.ofByteArray());
        if (r.statusCode() == 404) {
          throw new org.apache.iceberg.exceptions.NotFoundException("not found: %s", path);
        }
        return r.body();
      } catch (IOException | InterruptedException e) {
        throw new RuntimeException(e);
      }
    }

    private void put(String path, byte[] data) {
      try {
        HttpResponse<String> r = http().send(
            HttpRequest.newBuilder(uri(path)).PUT(HttpRequest.BodyPublishers.ofByteArray(data)).build(),
            HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() >= 300) {
          throw new RuntimeException("PUT " + path + " failed: " + r.statusCode() + " " + r.body());
        }
      } catch (IOException | InterruptedException e) {
        throw new RuntimeException(e);
      }
    }

    private boolean exists(String path) {
      try {
        return http().send(HttpRequest.newBuilder(uri(path)).method("HEAD", HttpRequest.BodyPublishers.noBody()).build(),
            HttpResponse.BodyHandlers.discarding()).statusCode() == 200;
      } catch (IOException | InterruptedException e) {
        throw new RuntimeException(e);
      }
    }

    @Override
    public InputFile newInputFile(String path) {
      if (!isS3(path)) {
        return local.newInputFile(path);
      }
      return new InputFile() {
        private byte[] data;

        private byte[] data() {
          if (data == null) {
            data = get(path);
          }
          return data;
        }

        @Override
        public long getLength() {
          return data().length;
        }

        @Override
        public SeekableInputStream newStream() {
          byte[] bytes = data();
          return new SeekableInputStream() {
            private int pos;

            @Override
            public long getPos() {
              return pos;
            }

            @Override
            public void seek(long newPos) {
              pos = (int) newPos;
            }

            @Override
            public int read() {
              return pos < bytes.length ? (bytes[pos++] & 0xff) : -1;
            }

            @Override
            public int read(byte[] b, int off, int len) {
              if (pos >= bytes.length) {
                return -1;
              }
              int n = Math.min(len, bytes.length - pos);
              System.arraycopy(bytes, pos, b, off, n);
              pos += n;
              return n;
            }
          };
        }

        @Override
        public String location() {
          return path;
        }

        @Override
        public boolean exists() {
          return FilerFileIO.this.exists(path);
        }
      };
    }

    @Override
    public OutputFile newOutputFile(String path) {
      if (!isS3(path)) {
        return local.newOutputFile(path);
      }
      return new OutputFile() {
        private PositionOutputStream stream(boolean overwrite) {
          if (!overwrite && FilerFileIO.this.exists(path)) {
            throw new org.apache.iceberg.exceptions.AlreadyExistsException("already exists: %s", path);
          }
          ByteArrayOutputStream buffer = new ByteArrayOutputStream();
          return new PositionOutputStream() {
            @Override
            public long getPos() {
              return buffer.size();
            }

            @Override
            public void write(int b) {
              buffer.write(b);
            }

            @Override
            public void write(byte[] b, int off, int len) {
              buffer.write(b, off, len);
            }

            @Override
            public void close() {
              put(path, buffer.toByteArray());
            }
          };
        }

        @Override
        public PositionOutputStream create() {
          return stream(false);
        }

        @Override
        public PositionOutputStream createOrOverwrite() {
          return stream(true);
        }

        @Override
        public String location() {
          return path;
        }

        @Override
        public InputFile toInputFile() {
          return newInputFile(path);
        }
      };
    }

    @Override
    public void deleteFile(String path) {
      if (!isS3(path)) {
        local.deleteFile(path);
        return;
      }
      try {
        http().send(HttpRequest.newBuilder(uri(path)).DELETE().build(), HttpResponse.BodyHandlers.discarding());
      } catch (IOException | InterruptedException e) {
        throw new RuntimeException(e);
      }
    }
  }
}
