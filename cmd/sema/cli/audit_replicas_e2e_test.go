package cli_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Three replicas of `sema server --postgres` writing the audit trail at
// once, 3,000 rows between them (an identity created per request, each
// one audit row), keep one chain: `sema audit verify` passes through any
// replica, and the export holds every row once.
func TestThreeReplicasKeepOneAuditChain(t *testing.T) {
	postgresSchema(t)
	reps := []*laneServer{startServer(t, t.TempDir())}
	reps = append(reps, startReplica(t, reps[0]), startReplica(t, reps[0]))
	const perReplica, writers = 1000, 4
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: writers}}
	errs := make(chan error, len(reps)*writers)
	var wg sync.WaitGroup
	for r, rep := range reps {
		for w := range writers {
			wg.Go(func() {
				for i := w; i < perReplica; i += writers {
					body := fmt.Sprintf(`{"name":"u-%d-%d"}`, r, i)
					req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, rep.url+"/v1/identities", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+rep.key)
					req.Header.Set("Content-Type", "application/json")
					resp, err := hc.Do(req)
					if err != nil {
						errs <- err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
						errs <- fmt.Errorf("replica %d: creating u-%d-%d: %s", r, r, i, resp.Status)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const total = 3 * perReplica
	waitFor(t, "the 3,000 identity.created rows", func() bool {
		return len(exportAudit(t, reps[0], "--event", "identity.created")) >= total
	})
	created := map[string]bool{}
	for _, e := range exportAudit(t, reps[1], "--event", "identity.created") {
		created[e.IdentityID] = true
	}
	if len(created) != total {
		t.Fatalf("%d identities in the audit trail, want %d, each once", len(created), total)
	}
	verified := regexp.MustCompile(`^verified ([0-9]+) rows of the audit trail up to audit:([0-9]+):[0-9a-f]{64}\nverified 0 rows of the instruction history up to history:0:0{64}\n$`)
	for i, rep := range reps {
		out, errOut, code := rep.sema(t, nil, "audit", "verify")
		m := verified.FindStringSubmatch(out)
		if code != 0 || m == nil || m[1] != m[2] {
			t.Fatalf("audit verify through replica %d: exit %d %q %s", i, code, out, errOut)
		}
	}
}
