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

	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/cache"
)

// Account is the tenant a token belongs to.
type Account struct {
	bun.BaseModel `bun:"table:accounts"`

	ID            int64  `bun:"id,pk,autoincrement"`
	Name          string `bun:"name"`
	DecimalPlaces *int   `bun:"decimal_places"`
}

type token struct {
	bun.BaseModel `bun:"table:tokens"`

	ID        int64  `bun:"id,pk,autoincrement"`
	AccountID int64  `bun:"account_id"`
	Hash      []byte `bun:"hash"`
	Label     string `bun:"label"`
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

func hashToken(t string) []byte {
	h := sha256.Sum256([]byte(t))
	return h[:]
}

// Authenticate returns the account holding the token.
func Authenticate(ctx context.Context, db bun.IDB, tok string) (*Account, error) {
	var row struct {
		Hash []byte `bun:"hash"`
		Account
	}
	h := hashToken(tok)
	err := db.NewRaw(`SELECT t.hash, a.id, a.name, a.decimal_places
		FROM tokens t JOIN accounts a ON a.id = t.account_id
		WHERE t.hash = ? AND t.revoked_at IS NULL`, h).Scan(ctx, &row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrBadToken
	}
	if err != nil {
		return nil, fmt.Errorf("look up token: %w", err)
	}
	// The index lookup already matched; the constant-time comparison keeps the final
	// decision free of early-exit timing.
	if subtle.ConstantTimeCompare(row.Hash, h) != 1 {
		return nil, ErrBadToken
	}
	a := row.Account
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

// CreateToken adds a new token to the named account and returns it.
func CreateToken(ctx context.Context, db bun.IDB, account string) (string, error) {
	tok, err := NewToken()
	if err != nil {
		return "", err
	}
	return tok, addToken(ctx, db, account, tok)
}

func addToken(ctx context.Context, db bun.IDB, account, tok string) error {
	res, err := db.NewRaw(`INSERT INTO tokens (account_id, hash)
		SELECT id, ? FROM accounts WHERE name = ?`, hashToken(tok), account).Exec(ctx)
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
				WHERE tokens.account_id = EXCLUDED.account_id`, a.ID, hashToken(fixedToken)).Exec(ctx)
		case created:
			if newToken, err = NewToken(); err == nil {
				_, err = tx.NewInsert().Model(&token{AccountID: a.ID, Hash: hashToken(newToken), Label: "bootstrap"}).
					Exec(ctx)
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
	db    bun.IDB
	cache *cache.Cache[[sha256.Size]byte, Account]
}

// NewTokens makes the cached authenticator and subscribes it to invalidations.
func NewTokens(db bun.IDB, o cache.Options, inv *cache.Router) *Tokens {
	t := &Tokens{db: db, cache: cache.New[[sha256.Size]byte, Account](o)}
	inv.On("token", func(i cache.Invalidation) {
		var k [sha256.Size]byte
		if b, err := hex.DecodeString(i.Hash); err == nil && len(b) == len(k) {
			copy(k[:], b)
			t.cache.Invalidate(k)
			return
		}
		t.cache.Purge() // not a hash we could have made: be safe
	})
	// account settings (decimal places) are copied into every entry: rare, drop all
	inv.On("account", func(cache.Invalidation) { t.cache.Purge() })
	return t
}

// Authenticate returns the account holding the token (a copy: callers may not share
// the cached entry).
func (t *Tokens) Authenticate(ctx context.Context, tok string) (*Account, error) {
	k := sha256.Sum256([]byte(tok))
	if a, ok := t.cache.Get(k); ok {
		return &a, nil
	}
	gen := t.cache.Begin()
	a, err := Authenticate(ctx, t.db, tok)
	if err != nil {
		return nil, err
	}
	t.cache.Fill(gen, k, *a)
	return a, nil
}

// Purge drops every cached token (the notification listener lost its connection).
func (t *Tokens) Purge() { t.cache.Purge() }
