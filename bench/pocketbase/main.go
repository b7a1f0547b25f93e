// Command pocketbase is the bench's PocketBase peer (issue 18, scenarios Q1
// and Q2; issue 23, W1, W64, HOT, R64, L32 and RT): PocketBase embedded from
// its published Go module, in a module of its own so that edgebase's go.mod
// does not carry it.
//
//	go build -o /tmp/pb . && /tmp/pb --http 127.0.0.1:8090 --dir /tmp/pbdata \
//	    --superuser-email su@example.com --superuser-password '...' \
//	    --user-email u@example.com --user-password '...'
//
// On start it sets up, once per data directory (idempotent):
//
//   - a superuser (the bench seeds the records through /api/batch with it);
//   - an end user of PocketBase's default "users" auth collection (the bench
//     queries as that user);
//   - two base collections with the fields of the bench's documents, status
//     (text), total (number), createdAt (number) and owner (text):
//     "orders", with the SQLite index (status, createdAt DESC), and
//     "orders_unindexed", without any index of its own;
//     listRule and viewRule "@request.auth.id != ”": any authenticated
//     caller, a rule decided from the token alone, like edgebase's default
//     rule for the project owner the bench queries as there; createRule,
//     updateRule and deleteRule stay nil (superusers only);
//   - a base collection "notes" that the end user writes, reads and
//     subscribes to (W1, W64, HOT, R64, RT): fields v (text), r, s and t
//     (numbers: the realtime run, sequence number and send time), and
//     listRule, viewRule, createRule and updateRule "@request.auth.id != ”"
//     (deleteRule nil): any authenticated user, as edgebase's default rule
//     lets a user write in their own users/<uid> tree;
//   - settings: the batch API enabled (--batch-max requests per batch) and
//     the request log off (Logs.MaxDays = 0): edgebase does not log each
//     request either.
//
// Then it serves PocketBase's API on --http until SIGINT or SIGTERM.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/pocketbase/pocketbase"
	"github.com/pocketbase/pocketbase/core"
)

// Collections and index the bench queries; the bench (package main of
// edgebase's bench) uses the same names.
const (
	indexedCollection   = "orders"
	unindexedCollection = "orders_unindexed"
	indexName           = "idx_orders_status_createdAt"
	notesCollection     = "notes"
)

type config struct {
	http, dir                 string
	superEmail, superPassword string
	userEmail, userPassword   string
	batchMax                  int
	batchTimeout              int64
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pocketbase peer:", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		slog.Error("pocketbase peer", "err", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("pocketbase", flag.ContinueOnError)
	fs.StringVar(&c.http, "http", "127.0.0.1:8090", "address to serve PocketBase's API on")
	fs.StringVar(&c.dir, "dir", "", "PocketBase's data directory (pb_data)")
	fs.StringVar(&c.superEmail, "superuser-email", "", "email of the superuser to create")
	fs.StringVar(&c.superPassword, "superuser-password", "", "password of the superuser")
	fs.StringVar(&c.userEmail, "user-email", "", "email of the end user (\"users\" collection) to create")
	fs.StringVar(&c.userPassword, "user-password", "", "password of the end user")
	fs.IntVar(&c.batchMax, "batch-max", 500, "most requests in one /api/batch request")
	fs.Int64Var(&c.batchTimeout, "batch-timeout", 60, "seconds one /api/batch transaction may take")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case c.dir == "":
		return nil, errors.New("--dir is required")
	case c.superEmail == "" || len(c.superPassword) < 10:
		return nil, errors.New("--superuser-email and --superuser-password (10+ characters) are required")
	case c.userEmail == "" || len(c.userPassword) < 8:
		return nil, errors.New("--user-email and --user-password (8+ characters) are required")
	case c.batchMax < 1 || c.batchTimeout < 1:
		return nil, errors.New("--batch-max and --batch-timeout must be positive")
	}
	return c, nil
}

func run(c *config) error {
	app := pocketbase.NewWithConfig(pocketbase.Config{
		HideStartBanner: true,
		DefaultDev:      false,
		DefaultDataDir:  c.dir,
	})
	app.OnServe().BindFunc(func(se *core.ServeEvent) error {
		if err := setup(se.App, c); err != nil {
			return fmt.Errorf("set up the bench's collections: %w", err)
		}
		return se.Next()
	})
	// PocketBase's own command line: serve on --http with --dir.
	app.RootCmd.SetArgs([]string{"serve", "--http", c.http, "--dir", c.dir})
	if err := app.Start(); err != nil {
		return fmt.Errorf("pocketbase: %w", err)
	}
	return nil
}

// setup creates what the bench needs; what exists already is kept.
func setup(app core.App, c *config) error {
	s := app.Settings()
	s.Batch.Enabled = true
	s.Batch.MaxRequests = c.batchMax
	s.Batch.Timeout = c.batchTimeout
	s.Logs.MaxDays = 0
	if err := app.Save(s); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	if err := ensureAuthRecord(app, core.CollectionNameSuperusers, c.superEmail, c.superPassword); err != nil {
		return fmt.Errorf("superuser: %w", err)
	}
	if err := ensureAuthRecord(app, "users", c.userEmail, c.userPassword); err != nil {
		return fmt.Errorf("user: %w", err)
	}
	if err := ensureOrders(app, indexedCollection, true); err != nil {
		return err
	}
	if err := ensureOrders(app, unindexedCollection, false); err != nil {
		return err
	}
	return ensureCollection(app, notesCollection, func() *core.Collection { return notes(notesCollection) })
}

func ensureAuthRecord(app core.App, collection, email, password string) error {
	if _, err := app.FindAuthRecordByEmail(collection, email); err == nil {
		return nil
	}
	col, err := app.FindCollectionByNameOrId(collection)
	if err != nil {
		return fmt.Errorf("collection %s: %w", collection, err)
	}
	r := core.NewRecord(col)
	r.SetEmail(email)
	r.SetPassword(password)
	r.SetVerified(true)
	if err := app.Save(r); err != nil {
		return fmt.Errorf("save %s record %s: %w", collection, email, err)
	}
	return nil
}

// ordersCollection is the bench's collection name with its fields, rules
// and (indexed) the index on (status, createdAt DESC).
func ordersCollection(name string, indexed bool) *core.Collection {
	col := core.NewBaseCollection(name)
	authenticated := "@request.auth.id != ''"
	col.ListRule = &authenticated
	col.ViewRule = &authenticated
	col.Fields.Add(
		&core.TextField{Name: "status", Required: true},
		&core.NumberField{Name: "total"},
		&core.NumberField{Name: "createdAt", OnlyInt: true},
		&core.TextField{Name: "owner"},
	)
	if indexed {
		col.AddIndex(indexName, false, "`status`, `createdAt` DESC", "")
	}
	return col
}

func ensureOrders(app core.App, name string, indexed bool) error {
	return ensureCollection(app, name, func() *core.Collection { return ordersCollection(name, indexed) })
}

// notes is the collection the end user writes, reads and subscribes to:
// every rule but delete wants an authenticated caller.
func notes(name string) *core.Collection {
	col := core.NewBaseCollection(name)
	authenticated := "@request.auth.id != ''"
	col.ListRule = &authenticated
	col.ViewRule = &authenticated
	col.CreateRule = &authenticated
	col.UpdateRule = &authenticated
	col.Fields.Add(
		&core.TextField{Name: "v", Max: 1 << 20},
		&core.NumberField{Name: "r", OnlyInt: true},
		&core.NumberField{Name: "s", OnlyInt: true},
		&core.NumberField{Name: "t", OnlyInt: true},
	)
	return col
}

// ensureCollection creates the collection build returns unless one named
// name exists.
func ensureCollection(app core.App, name string, build func() *core.Collection) error {
	if _, err := app.FindCollectionByNameOrId(name); err == nil {
		return nil
	}
	if err := app.Save(build()); err != nil {
		return fmt.Errorf("create collection %s: %w", name, err)
	}
	return nil
}
