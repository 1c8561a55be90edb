// Package auth holds accounts and their API tokens: creation, the admin bootstrap and
// the lookup behind the authentication middleware (API.md §1).
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/cache"
	"github.com/sensordata/sensorapi/pkg/model"
)

// Account is the tenant a token belongs to.
type Account struct {
	bun.BaseModel `bun:"table:accounts"`

	ID            int64  `bun:"id,pk,autoincrement"`
	Name          string `bun:"name"`
	DecimalPlaces *int   `bun:"decimal_places"`
}

// AdminAccount is the account bootstrapped on an empty database.
const AdminAccount = "admin"

// ErrBadToken means the token is unknown or revoked.
var ErrBadToken = errors.New("unknown or revoked token")

// ErrNoAccount means no account has the given name.
var ErrNoAccount = errors.New("no such account")

// NewToken returns a random token: 32 bytes, 43 url-safe characters.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// HashToken is how tokens are stored: SHA-256 of the secret.
func HashToken(t string) []byte {
	h := sha256.Sum256([]byte(t))
	return h[:]
}

// Access is what a token grants: its account, its scope, and for a device token its
// device.
type Access struct {
	Account
	Scope  Scope
	Device *Device // device tokens only
}

// Device is the device a device token is bound to.
type Device struct {
	ID    int64
	Label string
}

// Authenticate returns what the token grants.
func Authenticate(ctx context.Context, db bun.IDB, tok string) (*Access, error) {
	h := HashToken(tok)
	var (
		hash     []byte
		a        Access
		devID    *int64
		devLabel *string
	)
	err := db.QueryRowContext(ctx, `SELECT t.hash, a.id, a.name, a.decimal_places, t.scope, d.id, d.label
		FROM tokens t JOIN accounts a ON a.id = t.account_id LEFT JOIN devices d ON d.id = t.device_id
		WHERE t.hash = ? AND t.revoked_at IS NULL`, h).
		Scan(&hash, &a.ID, &a.Name, &a.DecimalPlaces, &a.Scope, &devID, &devLabel)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrBadToken
	}
	if err != nil {
		return nil, fmt.Errorf("look up token: %w", err)
	}
	// The index lookup already matched; the constant-time comparison keeps the final
	// decision free of early-exit timing.
	if subtle.ConstantTimeCompare(hash, h) != 1 {
		return nil, ErrBadToken
	}
	if devID != nil {
		a.Device = &Device{ID: *devID, Label: *devLabel}
	}
	return &a, nil
}

// CreateAccount creates an account with one new token and returns the token.
func CreateAccount(ctx context.Context, db bun.IDB, name string) (string, error) {
	tok, err := NewToken()
	if err != nil {
		return "", err
	}
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		a := &Account{Name: name}
		if _, err := tx.NewInsert().Model(a).Column("name").Returning("id").Exec(ctx); err != nil {
			return fmt.Errorf("insert account %q: %w", name, err)
		}
		if err := createRoles(ctx, tx, a.ID); err != nil {
			return err
		}
		return addToken(ctx, tx, name, tok)
	})
	return tok, err
}

// AccountID is the key of the account with that name.
func AccountID(ctx context.Context, db bun.IDB, name string) (int64, error) {
	var id int64
	err := db.NewRaw(`SELECT id FROM accounts WHERE name = ?`, name).Scan(ctx, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("account %q: %w", name, ErrNoAccount)
	}
	if err != nil {
		return 0, fmt.Errorf("account %q: %w", name, err)
	}
	return id, nil
}

func addToken(ctx context.Context, db bun.IDB, account, tok string) error {
	res, err := db.NewRaw(`INSERT INTO tokens (account_id, hash)
		SELECT id, ? FROM accounts WHERE name = ?`, HashToken(tok), account).Exec(ctx)
	if err != nil {
		return fmt.Errorf("insert token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("account %q: %w", account, ErrNoAccount)
	}
	return nil
}

// createRoles adds the three Roles every account has (API.md §4).
func createRoles(ctx context.Context, db bun.IDB, accountID int64) error {
	_, err := db.NewRaw(`INSERT INTO roles (account_id, label, name)
		SELECT ?, r, r FROM unnest(ARRAY['admin','editor','viewer']) r
		ON CONFLICT (account_id, label) DO NOTHING`, accountID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("create roles: %w", err)
	}
	return nil
}

// Bootstrap makes sure the admin account exists. With a fixed token (from
// SENSORAPI_ADMIN_TOKEN) that token is made valid for it; otherwise, when the account
// is new, a random token is created and returned so it can be shown once. It returns
// "" when nothing needs showing.
func Bootstrap(ctx context.Context, db bun.IDB, fixedToken string) (string, error) {
	var newToken string
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// serialise instances starting together
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(727431119)"); err != nil {
			return fmt.Errorf("bootstrap lock: %w", err)
		}
		a := &Account{}
		err := tx.NewSelect().Model(a).Where("name = ?", AdminAccount).Scan(ctx)
		created := errors.Is(err, sql.ErrNoRows)
		if created {
			a.Name = AdminAccount
			if _, err = tx.NewInsert().Model(a).Column("name").Returning("id").Exec(ctx); err != nil {
				return fmt.Errorf("create admin account: %w", err)
			}
		} else if err != nil {
			return fmt.Errorf("read admin account: %w", err)
		}
		if err := createRoles(ctx, tx, a.ID); err != nil {
			return err
		}
		switch {
		case fixedToken != "":
			_, err = tx.NewRaw(`INSERT INTO tokens (account_id, hash, label) VALUES (?, ?, 'SENSORAPI_ADMIN_TOKEN')
				ON CONFLICT (hash) DO UPDATE SET revoked_at = NULL
				WHERE tokens.account_id = EXCLUDED.account_id`, a.ID, HashToken(fixedToken)).Exec(ctx)
		case created:
			if newToken, err = NewToken(); err == nil {
				t := &model.Token{AccountID: a.ID, Hash: HashToken(newToken), Label: "bootstrap"}
				_, err = tx.NewInsert().Model(t).Column("account_id", "hash", "label").Exec(ctx)
			}
		}
		if err != nil {
			return fmt.Errorf("admin token: %w", err)
		}
		return nil
	})
	return newToken, err
}

// Tokens authenticates through an in-memory cache of token hash → account, so a
// request costs no database round trip for its token. Revocations reach every
// instance through the database's invalidation triggers (pkg/cache).
type Tokens struct {
	// Timeout bounds a lookup (0: the caller's context only), so that a database that
	// stopped answering gets the caller a 503 rather than a wait for the kernel to
	// give the connection up.
	Timeout time.Duration

	db    bun.IDB
	cache *cache.Cache[[sha256.Size]byte, Access]
}

// NewTokens makes the cached authenticator and subscribes it to invalidations.
func NewTokens(db bun.IDB, o cache.Options, inv *cache.Router) *Tokens {
	t := &Tokens{db: db, cache: cache.New[[sha256.Size]byte, Access](o)}
	inv.On("token", func(i cache.Invalidation) {
		var k [sha256.Size]byte
		if b, err := hex.DecodeString(i.Hash); err == nil && len(b) == len(k) {
			copy(k[:], b)
			t.cache.Invalidate(k)
			return
		}
		t.cache.Purge() // not a hash we could have made: be safe
	})
	// account settings (decimal places) and device labels are copied into entries: their
	// changes are rare, so drop everything
	inv.On("account", func(cache.Invalidation) { t.cache.Purge() })
	inv.On("device", func(cache.Invalidation) { t.cache.Purge() })
	return t
}

// Authenticate returns what the token grants (a copy: callers may not share the cached
// entry).
func (t *Tokens) Authenticate(ctx context.Context, tok string) (*Access, error) {
	k := sha256.Sum256([]byte(tok))
	if a, ok := t.cache.Get(k); ok {
		return &a, nil
	}
	gen := t.cache.Begin()
	if t.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.Timeout)
		defer cancel()
	}
	a, err := Authenticate(ctx, t.db, tok)
	if err != nil {
		return nil, err
	}
	t.cache.Fill(gen, k, *a)
	return a, nil
}

// Purge drops every cached token (the notification listener lost its connection).
func (t *Tokens) Purge() { t.cache.Purge() }
