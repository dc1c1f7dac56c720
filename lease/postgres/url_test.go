package postgres

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		want      string // "" = valid; else in the error
	}{
		{"design example", "postgres://leasecron@db1:5432/ops?sslmode=verify-full", ""},
		{"postgresql scheme, no port", "postgresql://u@db1/ops", ""},
		{"scheme in capitals", "POSTGRES://u@db1/ops", "lower case"},
		{"password", "postgres://u:hunter2@127.0.0.1:5432/ops?sslmode=disable", ""},
		{"ipv6", "postgres://u@[::1]:5433/ops", ""},
		{"multi-host failover", "postgres://u@db1:5432,db2:5433/ops?target_session_attrs=read-write", ""},
		{"every option", "postgres://u@db1/ops?sslmode=require&connect_timeout=5&application_name=leasecron&options=-c%20lock_timeout%3D1s&channel_binding=prefer&sslsni=1", ""},
		{"no database", "postgres://u@db1", ""},
		{"empty", " ", "empty URL"},
		{"keyword/value", "host=db1 dbname=ops user=u password=hunter2", "keyword/value string"},
		{"no scheme", "db1:5432/ops", "scheme"},
		{"other scheme", "mysql://u@db1/ops", `unsupported scheme "mysql"`},
		{"no host", "postgres:///ops", "missing host"},
		{"socket via query", "postgres:///ops?host=/var/run/postgresql", "missing host"},
		{"bad port", "postgres://u@db1:99999/ops", `bad port "99999"`},
		{"zero port", "postgres://u@db1:0/ops", `bad port "0"`},
		{"port not a number", "postgres://u@db1:pg/ops", "not a valid URL"},
		{"empty port", "postgres://u@db1:/ops", "empty port"},
		{"bad port in host list", "postgres://u@db1:5432,db2:70000/ops", `bad port "70000"`},
		{"empty host in list", "postgres://u@db1:5432,:5433/ops", "missing host"},
		{"bad sslmode", "postgres://u@db1/ops?sslmode=always", `bad sslmode "always"`},
		{"sslmode twice", "postgres://u@db1/ops?sslmode=disable&sslmode=require", "given 2 times"},
		{"unknown option", "postgres://u@db1/ops?search_path=x", `unknown option "search_path"`},
		{"typo option", "postgres://u@db1/ops?ssl_mode=require", `unknown option "ssl_mode"`},
		{"password option", "postgres://u@db1/ops?password=hunter2", "password_file"},
		{"sslpassword", "postgres://u@db1/ops?sslpassword=hunter2", "option sslpassword is not accepted"},
		{"bad connect_timeout", "postgres://u@db1/ops?connect_timeout=soon", "bad connect_timeout"},
		{"bad target_session_attrs", "postgres://u@db1,db2/ops?target_session_attrs=primary-ish", "bad target_session_attrs"},
		{"password without user", "postgres://:hunter2@db1/ops", "without a user"},
		{"missing CA file", "postgres://u:hunter2@db1/ops?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem", "ca.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckURL(tc.url)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckURL(%q) = %v, want nil", tc.url, err)
			case tc.want != "" && err == nil:
				t.Fatalf("CheckURL(%q) = nil, want an error mentioning %q", tc.url, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("CheckURL(%q) = %v, want it to mention %q", tc.url, err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("password in error: %v", err)
			}
		})
	}
}

// TestCheckURLReadsCertificates: a readable CA file passes; the check is
// pgconn's, so a URL the backend could not open is refused at check time.
func TestCheckURLReadsCertificates(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckURL("postgres://u@db1/ops?sslmode=verify-full&sslrootcert=" + ca); err == nil {
		t.Error("a CA file that holds no certificate passes")
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://leasecron:hunter2@db1:5432/ops?sslmode=verify-full", "postgres://leasecron:xxxxx@db1:5432/ops?sslmode=verify-full"},
		{"postgres://leasecron@db1/ops", "postgres://leasecron@db1/ops"},
		{"postgres://u@db1/ops?password=hunter2&sslmode=disable", "postgres://u@db1/ops?password=xxxxx&sslmode=disable"},
		{"postgres://u:hunter2@db1:notaport/ops", "xxxxx@db1:notaport/ops"},
		{"u:hunter2@db1/ops", "xxxxx@db1/ops"},
		{"host=db1 password=hunter2 dbname=ops", "host=db1 password=xxxxx dbname=ops"},
		{"host=db1 password='hun ter2' dbname=ops", "host=db1 password=xxxxx dbname=ops"},
		{":hunter2", ":xxxxx"},
		{"db1:hunter2/ops", "db1:xxxxx"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(Redact(tc.in), "hunter2") || strings.Contains(Redact(tc.in), "ter2") {
			t.Errorf("Redact(%q) shows the password", tc.in)
		}
	}
}
