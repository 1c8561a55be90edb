package auth_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"testing"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

func TestAccountTokens(t *testing.T) {
	ctx := context.Background()
	tok, err := auth.CreateAccount(ctx, env.DB, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) < 32 {
		t.Fatalf("token %q shorter than 32 characters", tok)
	}
	a, err := auth.Authenticate(ctx, env.DB, tok)
	if err != nil || a.Name != "acme" {
		t.Fatalf("authenticate: %+v %v", a, err)
	}
	second, err := auth.NewToken()
	if err != nil || second == tok {
		t.Fatalf("second token %q %v", second, err)
	}
	if err := store.CreateToken(ctx, env.DB, &model.Token{AccountID: a.ID, Hash: auth.HashToken(second), Scope: "full"}); err != nil {
		t.Fatal(err)
	}
	if b, err := auth.Authenticate(ctx, env.DB, second); err != nil || b.ID != a.ID {
		t.Fatalf("second token: %+v %v", b, err)
	}
	if _, err := auth.Authenticate(ctx, env.DB, tok+"x"); !errors.Is(err, auth.ErrBadToken) {
		t.Fatalf("altered token: %v", err)
	}
	if _, err := auth.AccountID(ctx, env.DB, "nobody"); !errors.Is(err, auth.ErrNoAccount) {
		t.Fatalf("missing account: %v", err)
	}
	if _, err := auth.CreateAccount(ctx, env.DB, "acme"); err == nil {
		t.Fatal("duplicate account name accepted")
	}

	// Only hashes are stored.
	var hashes [][]byte
	if err := env.DB.NewRaw(`SELECT hash FROM tokens`).Scan(ctx, &hashes); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256([]byte(tok))
	found := false
	for _, h := range hashes {
		if bytes.Contains(h, []byte(tok)) {
			t.Fatal("a token is stored in clear")
		}
		found = found || bytes.Equal(h, want[:])
	}
	if !found {
		t.Fatal("the token's hash is not stored")
	}
	var roles []string
	if err := env.DB.NewRaw(`SELECT label FROM roles WHERE account_id = ? ORDER BY label`, a.ID).Scan(ctx, &roles); err != nil {
		t.Fatal(err)
	}
	if len(roles) != 3 || roles[0] != "admin" || roles[1] != "editor" || roles[2] != "viewer" {
		t.Fatalf("roles %v", roles)
	}
}

func TestBootstrap(t *testing.T) {
	ctx := context.Background()
	// env bootstrapped with a fixed token: it authenticates as admin.
	a, err := auth.Authenticate(ctx, env.DB, env.AdminToken)
	if err != nil || a.Name != auth.AdminAccount {
		t.Fatalf("admin token: %+v %v", a, err)
	}
	// Again with the same fixed token: idempotent, nothing to show.
	if shown, err := auth.Bootstrap(ctx, env.DB, env.AdminToken); err != nil || shown != "" {
		t.Fatalf("re-bootstrap: %q %v", shown, err)
	}
	// Without a fixed token on an existing admin account: no new token.
	if shown, err := auth.Bootstrap(ctx, env.DB, ""); err != nil || shown != "" {
		t.Fatalf("bootstrap existing: %q %v", shown, err)
	}
	// A new fixed token is added.
	if _, err := auth.Bootstrap(ctx, env.DB, "another-admin-token-0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	if b, err := auth.Authenticate(ctx, env.DB, "another-admin-token-0123456789abcdef"); err != nil || b.ID != a.ID {
		t.Fatalf("new fixed token: %+v %v", b, err)
	}
}

func TestBootstrapEmptyDatabasePrintsToken(t *testing.T) {
	ctx := context.Background()
	if _, err := env.DB.ExecContext(ctx, `DELETE FROM accounts WHERE name = 'admin'`); err != nil {
		t.Fatal(err)
	}
	shown, err := auth.Bootstrap(ctx, env.DB, "")
	if err != nil || len(shown) < 32 {
		t.Fatalf("bootstrap: %q %v", shown, err)
	}
	if a, err := auth.Authenticate(ctx, env.DB, shown); err != nil || a.Name != "admin" {
		t.Fatalf("generated token: %+v %v", a, err)
	}
	// restore the fixed test token for other tests
	if _, err := auth.Bootstrap(ctx, env.DB, env.AdminToken); err != nil {
		t.Fatal(err)
	}
}
