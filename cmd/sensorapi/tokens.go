package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"text/tabwriter"

	"github.com/sensordata/sensorapi/pkg/auth"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/store"
	"github.com/sensordata/sensorapi/pkg/validate"
)

const tokenUsage = `Usage: sensorapi token create [--account NAME] [--scope full|read|device] [--device LABEL] [--label LABEL]
       sensorapi token list   [--account NAME] [--device LABEL]
       sensorapi token revoke [--account NAME] ID

create prints the new token's secret alone on stdout: it is shown this once (only its
hash is stored). Scopes (API.md §13): full (everything in the account, the default),
read (GETs and analytics), device (the value routes and MQTT topics of --device only).
revoke takes effect within a second on every instance; MQTT connections that used the
token are closed. The account defaults to admin. Uses DATABASE_URL.

Examples:
  DATABASE_URL=postgres://... sensorapi token create --scope device --device boiler-1 --label boiler-1-fw
  DATABASE_URL=postgres://... sensorapi token list --device boiler-1
  DATABASE_URL=postgres://... sensorapi token revoke 5f1d3c0a9b8e7d6c5b4a3f2e
`

func tokenCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	acct := fs.String("account", auth.AdminAccount, "account `NAME`")
	scope := fs.String("scope", "full", "full, read or device")
	device := fs.String("device", "", "device `LABEL` (device tokens; list: that device's tokens)")
	label := fs.String("label", "", "the token's `LABEL`")
	fs.Usage = func() { fmt.Fprint(fs.Output(), tokenUsage) }
	if len(args) == 0 || args[0][0] == '-' {
		if err := fs.Parse(args); err != nil { // --help
			return err
		}
		fs.Usage()
		return errors.New("token: want create, list or revoke")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	sub := map[string]func(context.Context, *store.DB, int64, int64) error{
		"create": func(ctx context.Context, db *store.DB, a, d int64) error {
			return createToken(ctx, db, a, d, *scope, *label)
		},
		"list": listTokens,
		"revoke": func(ctx context.Context, db *store.DB, a, d int64) error {
			return revokeToken(ctx, db, a, d, fs.Arg(0))
		},
	}[args[0]]
	if sub == nil {
		fs.Usage()
		return fmt.Errorf("token: unknown subcommand %q", args[0])
	}
	db, err := openMigrated(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	a, err := auth.AccountID(ctx, db, *acct)
	if err != nil {
		return err
	}
	d, err := deviceByLabel(ctx, db, a, *device)
	if err != nil {
		return err
	}
	return sub(ctx, db, a, d)
}

// deviceByLabel is the key of the account's device with that label (0 for "").
func deviceByLabel(ctx context.Context, db *store.DB, account int64, label string) (int64, error) {
	if label == "" {
		return 0, nil
	}
	l, ok := validate.Label(label)
	if !ok {
		return 0, fmt.Errorf("--device %q: %s", label, validate.MsgLabel)
	}
	d, err := store.GetDevice(ctx, db, account, validate.Key{Label: l}, false)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("--device %q: no such device in the account", label)
	}
	if err != nil {
		return 0, err
	}
	return d.ID, nil
}

func createToken(ctx context.Context, db *store.DB, account, device int64, scope, label string) error {
	t := &model.Token{AccountID: account, Label: label, Scope: scope}
	switch {
	case scope == string(auth.ScopeDevice) && device == 0:
		return errors.New("token create: --scope device needs --device")
	case scope == string(auth.ScopeDevice):
		t.DeviceID = &device
	case device != 0:
		return errors.New("token create: --device goes with --scope device")
	default:
		sc, ok := auth.ParseScope(scope)
		if !ok {
			return fmt.Errorf("token create: --scope %q: want full, read or device", scope)
		}
		t.Scope = string(sc)
	}
	secret, err := auth.NewToken()
	if err != nil {
		return err
	}
	t.Hash = auth.HashToken(secret)
	if err := store.CreateToken(ctx, db, t); err != nil {
		return err
	}
	fmt.Println(secret)
	return nil
}

func listTokens(ctx context.Context, db *store.DB, account, device int64) error {
	p := store.ParseList(url.Values{"page_size": {"1000"}}, store.TokenFields, "-createdAt", "t.id")
	tokens, _, err := store.ListTokens(ctx, db, account, device, p)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSCOPE\tDEVICE\tLABEL\tCREATED")
	for i := range tokens {
		r := tokens[i].JSON("")
		dev := "-"
		if r.Device != nil {
			dev = r.Device.Label
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Scope, dev, r.Label, r.CreatedAt)
	}
	return w.Flush()
}

func revokeToken(ctx context.Context, db *store.DB, account, device int64, id string) error {
	if id == "" {
		return errors.New("token revoke: want the token's ID (see token list)")
	}
	ok, err := store.DeleteToken(ctx, db, account, device, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("token revoke: no token %s in the account", id)
	}
	fmt.Fprintln(os.Stderr, "revoked", id)
	return nil
}
