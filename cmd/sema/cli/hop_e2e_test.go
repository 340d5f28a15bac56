package cli_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane/cluster"
)

// The hop between replicas, attacked through the real `sema server
// --postgres`: with the registry's cluster secret (what whoever reads the
// database has), a hop signed as a live replica is served once; the same
// hop again (a replay), one whose body was swapped, one signed with
// another secret, and one claiming a replica the registry does not list
// live are refused 403. After `sema server rotate-cluster-secret` the
// replicas still forward to each other, and the old secret no longer
// signs a hop once the rotation is done.
func TestTheRealServerRefusesForgedReplayedAndAlteredHops(t *testing.T) {
	admin, schema := postgresSchema(t)
	first := startServer(t, t.TempDir(), "--lease-ttl", "3s")
	second := startReplica(t, first, "--lease-ttl", "3s")
	_, deviceID, _ := enrollAndServe(t, first, t.TempDir())
	var secret, secondID string
	if err := admin.QueryRowContext(t.Context(), `SELECT secret FROM `+schema+`.cluster_secret`).Scan(&secret); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRowContext(t.Context(), `SELECT id FROM `+schema+`.replicas WHERE advertise_url = $1`, second.url).Scan(&secondID); err != nil {
		t.Fatalf("the second replica's row: %v", err)
	}
	const body = `{"kind":"exec","args":{"command":"true"},"timeoutMs":5000}`
	post := func(signed, sent string, hop *cluster.Hop, headers http.Header) (int, http.Header) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, first.url+"/v1/devices/"+deviceID+"/instructions", strings.NewReader(sent))
		req.Header.Set("Authorization", "Bearer "+first.key)
		if headers != nil {
			for k, v := range headers {
				req.Header[k] = v
			}
		} else {
			hop.Sign(req, "192.0.2.7", []byte(signed))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK && !bytes.Contains(out, []byte(`"state":"terminal"`)) {
			t.Fatalf("a served hop's stream: %s", out)
		}
		return resp.StatusCode, req.Header
	}
	asSecond, _ := cluster.NewHop(secret, secondID, time.Now)
	status, sentHeaders := post(body, body, asSecond, nil)
	if status != http.StatusOK {
		t.Fatalf("a hop signed as the live second replica: %d; want 200", status)
	}
	other, _ := cluster.NewHop(strings.Repeat("x", 43), secondID, time.Now)
	nobody, _ := cluster.NewHop(secret, "rep_nobody", time.Now)
	for name, try := range map[string]func() int{
		"replayed":          func() int { s, _ := post(body, body, nil, sentHeaders); return s },
		"its body swapped":  func() int { s, _ := post(body, strings.Replace(body, "true", "rm -rf ~", 1), asSecond, nil); return s },
		"another secret":    func() int { s, _ := post(body, body, other, nil); return s },
		"no live replica's": func() int { s, _ := post(body, body, nobody, nil); return s },
	} {
		if got := try(); got != http.StatusForbidden {
			t.Errorf("a hop %s: %d; want 403", name, got)
		}
	}

	out, errOut, code := first.sema(t, nil, "server", "rotate-cluster-secret", "--lease-ttl", "3s")
	if code != 0 || !strings.Contains(out, "rotated the cluster secret") {
		t.Fatalf("rotate-cluster-secret: exit %d, %q %s", code, out, errOut)
	}
	// Forwards pass in every phase: at once, and after the replicas have
	// signed with the new secret for a while.
	for _, wait := range []time.Duration{0, 5 * time.Second} {
		time.Sleep(wait)
		if out, errOut, code := second.sema(t, nil, "run", "--device", deviceID, "--", "echo forwarded"); code != 0 || out != "forwarded\n" {
			t.Fatalf("a forward %v after the rotation: exit %d, %q %s", wait, code, out, errOut)
		}
	}
	// The rotation is done once two lease TTLs and the hop's window have
	// passed; the registry's clock is moved there instead of waiting.
	if _, err := admin.ExecContext(t.Context(), `UPDATE `+schema+`.cluster_secret SET rotated_ms = rotated_ms - 120000`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old secret to be refused", func() bool {
		s, _ := post(body, body, asSecond, nil)
		return s == http.StatusForbidden
	})
	if out, errOut, code := second.sema(t, nil, "run", "--device", deviceID, "--", "echo still"); code != 0 || out != "still\n" {
		t.Fatalf("a forward after the rotation is done: exit %d, %q %s", code, out, errOut)
	}
}

// rotate-cluster-secret on a data dir with no registry says so and makes
// none; on a registry no replica has stored a secret in, it says why.
func TestRotateClusterSecretNeedsARegistryWithASecret(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "none")
	p := startProc(t, nil, nil, "server", "rotate-cluster-secret", "--data", empty)
	if code := p.wait(t); code != 1 || !strings.Contains(p.stderr.String(), "no registry in "+empty) {
		t.Fatalf("an empty data dir: exit %d %s", code, p.stderr)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Fatalf("the data dir was made: %v", err)
	}
	single := startServer(t, t.TempDir()) // no --postgres: no replica stores a secret
	p = startProc(t, nil, nil, "server", "rotate-cluster-secret", "--data", single.data)
	if code := p.wait(t); code != 1 || !strings.Contains(p.stderr.String(), "no cluster secret yet") {
		t.Fatalf("a registry without a secret: exit %d %s", code, p.stderr)
	}
}
