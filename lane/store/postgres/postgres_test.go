package postgres_test

import (
	"crypto/rand"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/postgres"
	"github.com/sema-agent/sema/lane/store/storetest"
)

// serverURL is the PostgreSQL the test command started (scripts/with-postgres)
// or the one named by SEMA_TEST_POSTGRES.
func serverURL(t *testing.T) string {
	u := os.Getenv("SEMA_TEST_POSTGRES")
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SEMA_TEST_POSTGRES is not set: CI must run the PostgreSQL suite (run the tests through `make test`)")
		}
		t.Skip("!!! SKIPPING the PostgreSQL store suite: SEMA_TEST_POSTGRES is not set; run `make test` to start a throwaway PostgreSQL")
	}
	return u
}

// openSchema opens a store in a fresh schema of its own, dropped at the end.
func openSchema(t *testing.T) (*sql.DB, string) {
	base := serverURL(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	schema := "t_" + strings.ToLower(rand.Text())
	if _, err := admin.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return admin, u.String()
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		_, u := openSchema(t)
		s, err := postgres.Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// Two servers starting at once on an empty database migrate it once.
func TestConcurrentStartsMigrateOnce(t *testing.T) {
	_, u := openSchema(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), u)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent start: %v", err)
		}
	}
	s, err := postgres.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rows, version int64
	s.DB().QueryRowContext(t.Context(), "SELECT count(*), max(version) FROM schema_migrations").Scan(&rows, &version)
	if rows != version || rows < 1 {
		t.Fatalf("%d migration rows for version %d: a migration ran twice or not at all", rows, version)
	}
}

func TestOpenNamesTheServerItCannotReach(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("err = %v, want a connection error naming 127.0.0.1:1", err)
	}
}

func TestUpgradeFromVersion3(t *testing.T) {
	storetest.UpgradeFromVersion3(t, os.DirFS("migrations"), postgres.Dialect, func(t *testing.T) storetest.Legacy {
		_, u := openSchema(t)
		raw, err := sql.Open("pgx", u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		return storetest.Legacy{Raw: raw, Open: func(t *testing.T) storetest.Backend {
			s, err := postgres.Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}}
	})
}

// Three replicas (three Store values, each with its own pool, on one
// database) appending at once keep one chain: no fork, no lost row.
func TestThreeReplicasAppendOneAuditChain(t *testing.T) {
	_, u := openSchema(t)
	var stores []store.Store
	for range 3 {
		s, err := postgres.Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	storetest.ChainAcrossReplicas(t, stores, 50, 20)
}
