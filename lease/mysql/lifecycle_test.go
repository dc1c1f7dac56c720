package mysql_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/mysqltest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/mysql"
)

// TestCompleteAfterExpiry: a lease whose TTL ran out on the server's clock
// and that nobody took since (its token is still in the row) completes:
// the epoch is then refused. A lease that someone else took does not.
func TestCompleteAfterExpiry(t *testing.T) {
	t.Parallel()
	s := mysqltest.Start(t)
	a, b := open(t, s.DSN()), open(t, s.DSN())
	const ttl = time.Second
	l, err := a.Acquire(ctxT(t), lease.Request{Key: "job", TTL: ttl, Epoch: 7})
	if err != nil {
		t.Fatal(err)
	}
	for {
		in, err := b.Inspect(ctxT(t), "job")
		if err != nil {
			t.Fatal(err)
		}
		if in.Holder == "" {
			break // expired on the server's clock
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := l.Complete(ctxT(t)); err != nil {
		t.Fatalf("Complete after expiry, nobody took the key: %v", err)
	}
	if _, err := try(t, b, lease.Request{Key: "job", TTL: ttl, Epoch: 7}); !errors.Is(err, lease.ErrEpochDone) {
		t.Fatalf("epoch 7 after Complete: %v, want ErrEpochDone", err)
	}
	l8, err := a.Acquire(ctxT(t), lease.Request{Key: "job", TTL: ttl, Epoch: 8})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(l8.ValidUntil()))
	l8b, err := b.Acquire(ctxT(t), lease.Request{Key: "job", TTL: 10 * time.Second, Epoch: 8, Owner: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l8.Complete(ctxT(t)); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Complete of a lease taken over: %v, want ErrNotHeld", err)
	}
	if l8b.Fence() <= l8.Fence() {
		t.Fatalf("FENCE WENT BACK: %d after %d", l8b.Fence(), l8.Fence())
	}
}

// TestCheckDSN: bad DSNs are refused without connecting, naming the
// culprit and never the password; good ones pass.
func TestCheckDSN(t *testing.T) {
	t.Parallel()
	const pw = "s3cret-pw"
	for _, dsn := range []string{
		"leasecron@tcp(db1:3306)/ops?tls=true",
		"leasecron:" + pw + "@tcp(db1:3306)/ops?tls=true&parseTime=true&transaction_isolation=%27READ-COMMITTED%27",
		"leasecron@unix(/run/mysqld/mysqld.sock)/ops",
		"leasecron:p@ss:w0rd@tcp(db1:3306)/ops?connectionAttributes=team:ops",
	} {
		if err := mysql.CheckDSN(dsn); err != nil {
			t.Errorf("CheckDSN(%q): %v", mysql.Redact(dsn), err)
		}
	}
	for dsn, want := range map[string]string{
		"leasecron:" + pw + "@tcp(db1:3306)/ops?allowAllFiles=true": "allowAllFiles",
		"leasecron:" + pw + "@tcp(db1:3306)/ops?sql_mode=x":         "sql_mode",
		"leasecron:" + pw + "@tcp(db1:3306)/":                       "no database",
		"leasecron:" + pw + "@tcp(db1:99999)/ops":                   "db1:99999",
		"mysql://leasecron:" + pw + "@db1:3306/ops":                 "a URL",
		"leasecron:" + pw + "@tcp(db1:3306)/ops?tls=bogus":          "bogus",
		"": "empty",
		"leasecron:p@" + pw + "@tcp(db1:3306)/ops?bogus=1": "bogus",
	} {
		err := mysql.CheckDSN(dsn)
		if err == nil {
			t.Errorf("CheckDSN(%q) accepted", mysql.Redact(dsn))
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, pw) {
			t.Errorf("CheckDSN(%q) = %q: want it to name %q and not the password", mysql.Redact(dsn), msg, want)
		}
	}
}

// TestSimultaneousAssignmentRefused: a server whose sql_mode has
// SIMULTANEOUS_ASSIGNMENT (the assignments would all see the old token,
// so a grant would set the new token without raising the fence or
// setting the expiry) is refused by Open, naming the mode.
func TestSimultaneousAssignmentRefused(t *testing.T) {
	t.Parallel()
	s := mysqltest.Start(t)
	s.Exec("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',SIMULTANEOUS_ASSIGNMENT')")
	ctx := ctxT(t)
	b, err := mysql.OpenWith(ctx, s.DSN(), mysql.WithTimeout(5*time.Second))
	if err == nil {
		_ = b.Close()
		t.Fatal("Open accepted a server with SIMULTANEOUS_ASSIGNMENT")
	}
	if !strings.Contains(err.Error(), "SIMULTANEOUS_ASSIGNMENT") {
		t.Fatalf("Open: %v; want it to name SIMULTANEOUS_ASSIGNMENT", err)
	}
}

// TestRedact: the server's name in messages never carries the password,
// whatever it holds, and WithPassword puts one where the driver reads it.
func TestRedact(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"u:pw@tcp(db1:3306)/ops?tls=true":                   "u@tcp(db1:3306)/ops",
		"u:p@w:d@tcp(db1:3306)/ops":                         "u@tcp(db1:3306)/ops",
		"u@unix(/run/mysqld/mysqld.sock)/ops":               "u@unix(/run/mysqld/mysqld.sock)/ops",
		"tcp(db1:3306)/ops":                                 "tcp(db1:3306)/ops",
		"u:pw@tcp(db1:3306)/ops?connectionAttributes=a:b@c": "u@tcp(db1:3306)/ops",
	} {
		if got := mysql.Redact(dsn); got != want {
			t.Errorf("Redact(%q) = %q, want %q", dsn, got, want)
		}
	}
	got, err := mysql.WithPassword("u@tcp(db1:3306)/ops?tls=true", "p@w:d")
	if err != nil || got != "u:p@w:d@tcp(db1:3306)/ops?tls=true" {
		t.Errorf("WithPassword: %q, %v", got, err)
	}
	if err := mysql.CheckDSN(got); err != nil {
		t.Errorf("CheckDSN(WithPassword(...)): %v", err)
	}
	if _, err := mysql.WithPassword("u:own@tcp(db1:3306)/ops", "x"); err == nil {
		t.Error("WithPassword over a DSN's own password")
	}
}
