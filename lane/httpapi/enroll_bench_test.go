package httpapi

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane"

	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/postgres"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

type unlimited struct{}

func (unlimited) allow(string, bucket) (bool, time.Duration, error) { return true, 0, nil }

// benchmarkEnroll measures POST /v1/devices/enroll over real HTTP, 8
// concurrent clients, each request a first registration. The §1.1 budget
// is per identity, so the limiter is lifted here to measure the plane.
func benchmarkEnroll(b *testing.B, st store.Store) {
	srv, err := lane.New(lane.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	a := New(srv)
	a.limiter = unlimited{}
	hs := httptest.NewServer(a)
	defer hs.Close()
	idn, key, err := lane.CreateIdentity(b.Context(), st, "bench")
	if err != nil {
		b.Fatal(err)
	}
	tokens := make([]string, b.N)
	bodies := make([]string, b.N)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("set_bench_%d_%d", time.Now().UnixNano(), i)
		if _, err := st.CreateEnrollToken(b.Context(), idn.ID, store.DigestOf(tokens[i]), time.Hour); err != nil {
			b.Fatal(err)
		}
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := json.Marshal(map[string]string{
			"token": tokens[i], "pubkey": base64.StdEncoding.EncodeToString(pub), "platformOs": "linux", "workspaceRoot": "/home/u/work",
		})
		bodies[i] = string(body)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var next atomic.Int64
	b.SetParallelism(4) // 4 × GOMAXPROCS clients
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			req, _ := http.NewRequest("POST", hs.URL+"/v1/devices/enroll", strings.NewReader(bodies[i]))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "enrolls/s")
}

func BenchmarkEnrollSQLite(b *testing.B) {
	st, err := sqlite.Open(b.Context(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	benchmarkEnroll(b, st)
}

func BenchmarkEnrollPostgres(b *testing.B) {
	base := os.Getenv("SEMA_TEST_POSTGRES")
	if base == "" {
		b.Skip("SEMA_TEST_POSTGRES is not set (run through scripts/with-postgres)")
	}
	st, err := postgres.Open(b.Context(), base)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	schema := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	if _, err := st.DB().ExecContext(b.Context(), "CREATE SCHEMA "+schema); err != nil {
		b.Fatal(err)
	}
	st.Close()
	defer func() {
		if cleanup, err := postgres.Open(b.Context(), base); err == nil {
			cleanup.DB().Exec("DROP SCHEMA " + schema + " CASCADE")
			cleanup.Close()
		}
	}()
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	st, err = postgres.Open(b.Context(), u.String())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	benchmarkEnroll(b, st)
}
