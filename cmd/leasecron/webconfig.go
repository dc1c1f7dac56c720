package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/exporter-toolkit/web"
)

// The --metrics listener (the status page, its per-job pages, /metrics
// and /healthz) is served through the Prometheus exporter toolkit, so
// that --web.config.file takes the file every Prometheus exporter takes
// (node_exporter's): tls_server_config (certificate, key, client_ca_file
// and client_auth_type for client certificates, versions, ciphers),
// basic_auth_users (bcrypt hashes) and http_server_config. Without the
// flag the listener is plain HTTP without authentication, as before. The
// file is read again for each new connection (certificates can be
// rotated in place); a bad file stops the daemon from starting.

// checkWebConfig validates the web config file at path ("" is none): a
// config error (exit 2) when it cannot be read, names a missing
// certificate or holds a user whose password is not a bcrypt hash.
func checkWebConfig(path string) error {
	if path == "" {
		return nil
	}
	if err := web.Validate(path); err != nil {
		return &configError{err: fmt.Errorf("--web.config.file %s: %w", path, err)}
	}
	return nil
}

// serveWeb serves srv on ln through the exporter toolkit with the web
// config file at path ("" serves plain HTTP) until srv is shut down.
func serveWeb(ln net.Listener, srv *http.Server, path string, log *slog.Logger) error {
	return web.Serve(ln, srv, &web.FlagConfig{WebConfigFile: &path}, log.With("component", "web"))
}
