package storetest

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"testing"

	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlstore"
	"github.com/sema-agent/sema/protocol"
)

// Legacy is an empty database to be given an old schema: raw is a handle on
// it, and open opens it as a Backend (migrating it).
type Legacy struct {
	Raw  *sql.DB
	Open func(t *testing.T) Backend
}

// UpgradeFromVersion3 checks that migration 4 carries a registry of schema
// version 3 over: the identity of the server.admin_created audit row is the
// admin (and without that row there is none: no fallback to the oldest
// identity, which would make an embedder's first user an admin), and every
// existing API key keeps working under a key_<ULID> id. migrations holds the
// backend's migration files; fresh makes an empty database.
func UpgradeFromVersion3(t *testing.T, migrations fs.FS, d sqlstore.Dialect, fresh func(t *testing.T) Legacy) {
	for _, withAdminRow := range []bool{true, false} {
		t.Run(fmt.Sprintf("adminCreatedRow=%v", withAdminRow), func(t *testing.T) {
			l := fresh(t)
			applyUpTo(t, l.Raw, migrations, 3)
			q := func(n int) string {
				if d.Placeholder == nil {
					return "?"
				}
				return d.Placeholder(n)
			}
			old := []struct{ id, name, key string }{
				{"idn_00000000000000000000000001", "admin", "sema_old_admin"},
				{"idn_00000000000000000000000002", "bob", "sema_old_bob"},
			}
			for _, o := range old {
				mustExec(t, l.Raw, fmt.Sprintf(`INSERT INTO identities (id, name, created_ms) VALUES (%s, %s, 1000)`, q(1), q(2)), o.id, o.name)
				digest := store.DigestOf(o.key)
				mustExec(t, l.Raw, fmt.Sprintf(`INSERT INTO api_keys (digest, identity_id, created_ms) VALUES (%s, %s, 1000)`, q(1), q(2)), digest[:], o.id)
			}
			if withAdminRow {
				mustExec(t, l.Raw, fmt.Sprintf(`INSERT INTO audit (at_ms, identity_id, event) VALUES (1000, %s, 'server.admin_created')`, q(1)), old[0].id)
			}
			l.Raw.Close()
			s := l.Open(t)
			for i, o := range old {
				idn, err := s.IdentityByAPIKey(ctx(t), store.DigestOf(o.key))
				wantAdmin := withAdminRow && i == 0
				if err != nil || idn.ID != o.id || idn.Admin != wantAdmin {
					t.Fatalf("after the upgrade %s's key finds %+v, %v; want it, admin %v", o.name, idn, err, wantAdmin)
				}
				ks, err := s.ListAPIKeys(ctx(t), o.id)
				if err != nil || len(ks) != 1 || !strings.HasPrefix(ks[0].ID, "key_") || !protocol.ValidULID(strings.TrimPrefix(ks[0].ID, "key_")) {
					t.Fatalf("%s's keys after the upgrade: %+v, %v; want one key_<ULID>", o.name, ks, err)
				}
			}
			if _, err := s.Session(ctx(t), "idn_00000000000000000000000001", "rs"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("sessions after the upgrade: %v", err)
			}
			// Rows written before the chain stay outside it; the chain
			// begins with the first row written after the upgrade.
			if err := s.Audit(ctx(t), store.AuditEvent{Event: "device.connected"}); err != nil {
				t.Fatal(err)
			}
			rows, err := s.AuditEvents(ctx(t), store.AuditFilter{})
			if err != nil || len(rows) == 0 || rows[len(rows)-1].Seq != 1 || (withAdminRow && (rows[0].Seq != 0 || rows[0].Digest != "")) {
				t.Fatalf("audit rows after the upgrade: %+v, %v; want the old row unchained, the new one seq 1", rows, err)
			}
			if rep, err := s.VerifyChain(ctx(t), "audit", nil); err != nil || rep.Problem != nil || rep.Rows != 1 {
				t.Fatalf("the chain after the upgrade: %+v, %v", rep, err)
			}
		})
	}
}

// applyUpTo applies the migrations up to version last, as sqlstore does.
func applyUpTo(t *testing.T, db *sql.DB, migrations fs.FS, last int) {
	t.Helper()
	names, err := fs.Glob(migrations, "*.sql")
	if err != nil || len(names) < last {
		t.Fatalf("migrations: %v, %v", names, err)
	}
	sort.Strings(names)
	mustExec(t, db, `CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_ms BIGINT NOT NULL)`)
	for i, name := range names[:last] {
		body, err := fs.ReadFile(migrations, name)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, string(body))
		mustExec(t, db, fmt.Sprintf(`INSERT INTO schema_migrations (version, name, applied_ms) VALUES (%d, '%s', 0)`, i+1, name))
	}
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(ctx(t), query, args...); err != nil {
		t.Fatalf("%s: %v", strings.SplitN(query, "\n", 2)[0], err)
	}
}
